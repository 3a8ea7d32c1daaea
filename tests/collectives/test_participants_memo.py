"""participants remembers each rank group's layout per unchanged graph: the answers must be
those of a fresh layout, and an in-place GPU type edit (not part of the graph's signature)
must still be seen."""

import topologies as tp

from flowsolver.collectives._layout import _laid_out, participants, without_nvls
from flowsolver.routing import gpu_nodes


def test_remembered_layouts_equal_fresh_ones_and_are_shared():
    g = tp.rail_optimized(4)
    nodes = gpu_nodes(g)
    groups = [[s * 8 + i for s in range(4)] for i in range(8)] + [[s * 8 + i for i in range(8)] for s in range(4)]
    for _ in range(2):                          # the second pass answers from the memo
        for ranks in groups:
            got, lay = participants(g, "all_reduce", ranks, None)
            assert got == ranks and lay == _laid_out(g, nodes, ranks, None)
    # the DP groups (one GPU per server, each on its rail) are laid out alike: one object
    dp = {id(participants(g, "all_reduce", ranks, None)[1]) for ranks in groups[:8]}
    assert len(dp) == 1
    # the servers' TP groups differ only in their NVSwitch, which only NVLS's schedule reads
    tp_layouts = [participants(g, "all_reduce", ranks, None)[1] for ranks in groups[8:]]
    assert len({lay.nvls.switch for lay in tp_layouts}) == 4
    assert len({id(without_nvls(g, lay)) for lay in tp_layouts}) == 1


def test_gpu_type_edited_in_place_is_seen():
    g = tp.rail_optimized(1)
    _, before = participants(g, "all_reduce", list(range(8)), None)
    assert before.nvls is not None              # H100: NVLS (NCCL: Hopper and Blackwell)
    for v in tp.gpus(g):
        g.nodes[v]["gpu_type"] = "a100_sxm"     # Ampere: no NVLS
    _, after = participants(g, "all_reduce", list(range(8)), None)
    assert after.nvls is None and "no NVLS" in after.nvls_unavailable
    for v in tp.gpus(g):
        g.nodes[v]["gpu_type"] = "h100_sxm"     # and back
    _, again = participants(g, "all_reduce", list(range(8)), None)
    assert again == before
