"""collective_variants under a policy whose routes follow the load (ugal): each variant is
routed on its own capacities, as collective() on that graph routes it. Before, every variant
took the first graph's routes without a word (a DragonFly with its global cables at a tenth
came out 1.5 % slower on its all-to-all than the same graph timed alone)."""

import pytest

import flowsolver as fs
import topologies as tp


def _derated_globals(graph, factor):
    out = graph.copy()
    for _, _, d in out.edges(data=True):
        if d.get("tier") == "global":
            d["capacity"] = d["capacity"] * factor
    return out


def test_ugal_variants_equal_each_graph_timed_alone():
    g = tp.dragonfly(2, 4, 2)
    h = _derated_globals(g, 0.1)
    together = fs.collective_variants([g, h], "all_to_all", 2**24, policy="ugal")
    alone = [fs.collective(x, "all_to_all", 2**24, policy="ugal") for x in (g, h)]
    assert [r.time for r in together] == pytest.approx([r.time for r in alone], rel=1e-12)
    # the two fabrics do differ for ugal: a tenth of the global rate is not a tenth of the time
    assert together[1].time > together[0].time


def test_load_free_policies_still_route_once():
    g = tp.dragonfly(2, 4, 2)
    h = _derated_globals(g, 0.5)
    together = fs.collective_variants([g, h], "all_to_all", 2**24, policy="minimal")
    alone = [fs.collective(x, "all_to_all", 2**24, policy="minimal") for x in (g, h)]
    assert [r.time for r in together] == pytest.approx([r.time for r in alone], rel=1e-12)
