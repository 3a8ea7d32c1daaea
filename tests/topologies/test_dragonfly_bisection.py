"""A DragonFly's recorded bisection is the least capacity any balanced cut holds: checked
against an exact minimum bisection (an integer program over which side every node is on)."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

import topologies as tp
from topologies.analysis import compute_fabric


def exact_min_bisection(g) -> float:
    """Least capacity (bytes/s, one direction) of edges from side 1 to side 0 over every split of
    the fabric's nodes with half the servers on each side (a server's GPUs together)."""
    core = compute_fabric(g)
    nodes = list(core)
    ix = {n: i for i, n in enumerate(nodes)}
    edges = [(ix[u], ix[v], float(d["capacity"])) for u, v, d in core.edges(data=True)]
    n, e = len(nodes), len(edges)
    # variables: x_node (1: side 1), y_edge >= x_u - x_v (the edge leaves side 1)
    cut = sp.lil_matrix((e, n + e))
    for k, (u, v, _) in enumerate(edges):
        cut[k, u], cut[k, v], cut[k, n + k] = 1, -1, -1
    servers: dict = {}
    for v, d in core.nodes(data=True):
        if d.get("kind") == "gpu":
            servers.setdefault(d.get("server", v), []).append(ix[v])
    rows = []
    for members in servers.values():                  # a server's GPUs on one side
        rows += [{members[0]: 1, m: -1} for m in members[1:]]
    balance = {members[0]: 1 for members in servers.values()}
    same = sp.lil_matrix((len(rows) + 1, n + e))
    for r, row in enumerate(rows + [balance]):
        for c, val in row.items():
            same[r, c] = val
    half = len(servers) // 2
    res = milp(np.r_[np.zeros(n), [c for *_, c in edges]], integrality=np.r_[np.ones(n), np.zeros(e)],
               bounds=Bounds(0, 1), constraints=[LinearConstraint(cut.tocsr(), -np.inf, 0),
                                                 LinearConstraint(same.tocsr(), [0] * len(rows) + [half],
                                                                  [0] * len(rows) + [half])])
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("args,kw", [
    ((2, 2, 3), dict(g=4)),      # a = 2: router r's global cables all reach router r -> halve the groups
    ((4, 2, 3), dict(g=4)),
    ((2, 2, 5), dict(g=6)),
    ((1, 2, 3), dict(g=4, arrangement="relative")),
    ((2, 3, 3), dict(g=4)),      # odd a: the group-aligned cut
    ((2, 4, 3), dict(g=4)),
    ((1, 4, 3), dict(g=4)),
])
def test_recorded_bisection_is_the_exact_minimum(args, kw):
    g = tp.dragonfly(*args, **kw)
    assert g.graph["bisection_bandwidth"] == pytest.approx(exact_min_bisection(g), rel=1e-9)


def test_two_router_groups_cut_through_every_group():
    # dragonfly(2, 2, 3, g=4), absolute: each group's 2 routers share one local cable (50 GB/s ib_ndr)
    # and router r's 3 global cables reach router r of other groups, so splitting every group
    # crosses 4 local cables and no global one: 200 GB/s, where groups {0, 1} | {2, 3} cross
    # 2 x 2 x m = 8 global cables (m = 2 x 3 / 3 = 2): 400 GB/s
    g = tp.dragonfly(2, 2, 3, g=4)
    assert g.graph["bisection_bandwidth"] == pytest.approx(4 * 50e9)
