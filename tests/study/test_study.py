"""The network study: table shape and ranges, the article's figures, the main job's outputs.

The main job runs once (quick) through the command line for the whole suite: the
``main_job`` fixture of tests/conftest.py."""

import pytest

import topologies as tp
from flowsolver import get_model, study
from flowsolver.cli import main
from flowsolver.study import _text


def test_network_study_has_one_row_per_network_in_range(main_job):
    rows = main_job["rows"]
    assert [r.network for r in rows] == list(study.NETWORKS)
    by = {r.network: r for r in rows}
    assert by["ideal"].step.speedup == pytest.approx(64, rel=1e-6)
    assert by["ideal"].step.comm_overhead < 1e-6
    for r in rows:
        assert 0 <= r.step.comm_overhead < 1 and 0 < r.step.speedup <= 64 * (1 + 1e-9)
    # the article's table (REFERENCE.md) is what the rows are compared with
    assert by["ib_ndr"].article == dict(tokens_per_s=3800.0, speedup=38.0, overhead=0.41)
    # NVLink matters more than the inter-server network; the slowest network costs the most
    assert by["pcie_only"].step.comm_overhead > by["eth_100g"].step.comm_overhead >= by["ib_ndr"].step.comm_overhead
    table = study.format_table(rows)
    assert len(table.splitlines()) == 2 + len(rows) and "InfiniBand NDR" in table


def test_article_search_is_sorted_and_finds_the_small_batch_regime():
    found = study.article_search(settings=[(8, 1, 1)], batches=[8, 512], overlaps=(0.0, 1.0))
    gaps = [r["worst_gap"] for r in found]
    assert gaps == sorted(gaps) and len(found) == 4
    assert found[0]["global_batch"] == 8 and found[0]["dp_overlap"] == 0.0
    # same line rate, same overhead within the measured-efficiency difference (47 vs 50 GB/s)
    o = found[0]["overheads"]
    assert abs(o["roce_400g"] - o["ib_ndr"]) < 0.05


def test_main_job_prints_the_study_and_writes_the_figure(main_job):
    text = main_job["text"]
    assert main_job["out"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main_job["figure"] == str(main_job["out"]) and f"figure written to {main_job['out']}" in text
    for needle in ("InfiniBand NDR", "400 Gb/s", "RoCE 400G and NDR share", "Which settings", "dragonfly",
                   "torus 3-D"):
        assert needle in text
    assert [r["gpus"] for r in main_job["topology"]] == [256, 256, 256]        # quick: 256 GPUs only
    assert main(["study", "--model", "nope", "--quick", "--out", "none"]) == 2


def test_printed_figures_come_from_the_catalogue_and_the_article(main_job, monkeypatch):
    text = main_job["text"]
    ndr, dgx = tp.get_link("ib_ndr"), tp.get_server("dgx_h100")
    assert f"of {tp.get_gpu('h100_sxm').peak_bf16_flops / 1e12:.0f} TFLOP/s" in text                 # 989
    assert f"({ndr.effective_bandwidth / 1e9:.0f} GB/s measured)" in text                              # 47
    assert f"has {dgx.nics} of them, {dgx.nics * ndr.bandwidth / 1e9:.0f} GB/s per server" in text    # 8, 400
    assert f"each GPU has {tp.get_link(dgx.nvlink).bandwidth / 1e9:.0f} GB/s of NVLink" in text       # 450
    # the prose follows the article's figures: change them and the text changes with them
    spec, rows = get_model("llama-3-70b"), main_job["rows"]
    monkeypatch.setattr(_text, "ARTICLE_SINGLE_GPU", 200.0)
    monkeypatch.setattr(_text, "ARTICLE", {**study.ARTICLE, "pcie_only": dict(study.ARTICLE["pcie_only"], overhead=0.9)})
    notes = "\n".join(_text.network_notes(spec, rows))
    assert "the article's 200 tokens/s" in notes and "speed-up x 200." in notes and "(article: over 90 %)" in notes
    section = _text.topology_section([dict(r, tp=4) for r in main_job["topology"]])
    assert "(TP 4, DP across servers, 64 sequences per replica" in section[0] and "the job's 4 DP rings" in section[-1]


def test_the_study_ends_with_commands_for_the_readers_own_cluster():
    """The three suggested commands are valid command lines of `flowsolver` as written."""
    import shlex

    from flowsolver.cli._parser import build_parser
    from flowsolver.study import _text
    from flowsolver.training import get_model

    lines = _text.your_own_section(get_model("llama-3-70b"), 8)
    commands = [line.strip().split("   ")[0] for line in lines if line.strip().startswith("flowsolver ")]
    assert len(commands) == 3
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.command in ("train", "upgrade", "sweep"), command
