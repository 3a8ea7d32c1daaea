"""topologies.dragonfly_plus: switch, port and cable counts from the DragonFly+ rules."""

from collections import Counter

import pytest

import topologies as tp


@pytest.mark.parametrize("L,S,p,h,g", [(4, 4, 4, 4, None), (4, 4, 4, 4, 9), (2, 3, 2, 2, 4), (3, 2, 1, 3, 7)])
def test_counts(L, S, p, h, g):
    net = tp.dragonfly_plus(L, S, p, h, groups=g)
    groups = S * h + 1 if g is None else g
    m = S * h // (groups - 1)
    d = tp.describe(net)
    assert d["switches_by_role"] == {"leaf": groups * L, "spine": groups * S}
    assert d["cables_by_tier"]["local"] == groups * L * S
    assert d["cables_by_tier"]["global"] == groups * S * h // 2
    assert d["cables_by_tier"]["access"] == groups * L * p
    # ports: leaf p + S, spine L + h; m cables between every pair of groups
    for n, data in net.nodes(data=True):
        if data["kind"] == "switch":
            ports = sum(e["cables"] for e in net[n].values())
            assert ports == (p + S if data["role"] == "leaf" else L + h)
    pair = Counter()
    for u, v, e in net.edges(data=True):
        if e["tier"] == "global":
            pair[(net.nodes[u]["group"], net.nodes[v]["group"])] += e["cables"]
    assert set(pair.values()) == {m} and len(pair) == groups * (groups - 1)
    assert tp.validate(net) is net


def test_errors():
    with pytest.raises(ValueError, match="groups - 1 must divide spines\\*global_per_spine = 16"):
        tp.dragonfly_plus(4, 4, 4, 4, groups=8)
    with pytest.raises(ValueError, match="groups must be between 2 and"):
        tp.dragonfly_plus(2, 2, 2, 2, groups=6)
