"""The article's figures are of its 64-GPU clusters (../shared/REFERENCE.md, 8 DGX H100): a study
of another size shows none beside the model (the 64-GPU speed-up beside an 8-GPU model's, as it
was, reads as a 64x gap), while 8 servers keep them."""

from flowsolver.study import format_table, network_study


def test_the_article_column_is_empty_beside_another_cluster_size():
    one = network_study(nodes=1, global_batch=8, networks=("ideal", "ib_ndr"))
    assert all(v is None for r in one for v in r.article.values())
    ndr = format_table(one).splitlines()[3].split()             # InfiniBand NDR, then the columns
    # tokens/s, article, speed-up, article, overhead, article, bottleneck tier
    assert ndr[2] != "-" and ndr[3] == "-" and ndr[5] == "-" and ndr[7] == "-"
    eight = network_study(global_batch=64, networks=("ib_ndr",))
    assert eight[0].step.gpus == 64 and eight[0].article == dict(tokens_per_s=3800.0, speedup=38.0, overhead=0.41)
