"""A hand-edited edge capacity that is no finite number >= 0 bytes/s is refused where routing
reads the graph, naming the edge as topologies.validate does: "50" (a string) was taken as 50
bytes/s, inf as a link that never fills, None raised a bare TypeError naming no edge."""

import re

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.routing import LinkTable

EDGE = ("s0/nic0", "su0/leaf0")


@pytest.mark.parametrize("bad", ["50", None, float("inf"), float("-inf"), float("nan"), -5.0, True, 1j])
def test_a_bad_capacity_is_refused_naming_the_edge(bad):
    g = tp.rail_optimized(2)
    g.edges[EDGE]["capacity"] = bad
    match = (r"edge 's0/nic0' -> 'su0/leaf0': capacity must be a finite number >= 0 bytes/s "
             r"\(0 = failed link\), got " + re.escape(repr(bad)))
    with pytest.raises(tp.TopologyError, match=match):
        fs.route(g, fs.Flows([0], [8], 1e9))
    with pytest.raises(tp.TopologyError, match=match):
        LinkTable.from_graph(g)


def test_numbers_of_other_types_are_read_as_their_value():
    # an int and a NumPy float are capacities (a graph built with NumPy arithmetic); a rail-0 flow
    # between the two servers crosses the edited NIC cable, which then holds it at 1e9 bytes/s
    for value in (10**9, np.float64(1e9)):
        g = tp.rail_optimized(2)
        g.edges[EDGE]["capacity"] = value
        rm = fs.route(g, fs.Flows([0], [8], 1e12))
        assert rm.links.capacity[list(g.edges).index(EDGE)] == 1e9
        assert float(np.asarray(fs.max_min_fair(rm).rates)[0]) == pytest.approx(1e9)
