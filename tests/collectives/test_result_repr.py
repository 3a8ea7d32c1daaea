"""A CollectiveResult prints its figures, not its per-link arrays (newuser23: print(r) was
about 17 KB of numpy arrays on 2 x DGX H100)."""

import topologies as tp

import flowsolver as fs


def test_the_printed_result_holds_the_figures_and_leaves_the_arrays_out():
    g = tp.rail_optimized(nodes=2)
    r = fs.collective(g, "all_gather", 2**20)
    text = repr(r)
    assert len(text) < 2000
    assert f"time={r.time!r}" in text and "protocol=" in text and "algorithm='ring'" in text
    assert "link_utilization" not in text and "steps=" not in text
    assert r.link_utilization.shape == (g.number_of_edges(),)       # still there, only not printed
