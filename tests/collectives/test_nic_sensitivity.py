"""The derivative of a time NCCL's cost model sets through its view of the NICs (``net_bw``:
NVLSTree's network levels and its network bound) is carried, not taken as a constant (adv19d
F3: a 256 MiB NVLSTree all-reduce on 2 x DGX H100 had 0 s per GB/s for its NICs where a
central difference of re-solves gives 1.78 us, 74 % of the NVLink slope). Each derivative is
checked against central differences of re-solves (docs/guide/sensitivities.md: to 1e-8)."""

import warnings

import numpy as np
import pytest

pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
import flowsolver as fs  # noqa: E402
from flowsolver.upgrade import tier_upgrades  # noqa: E402

H = 1e6          # bytes/s each link is moved by: the time is smooth there (1 / rate), rounding far below 1e-8


def _time(graph, size):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fs.collective(graph, "all_reduce", size).time


def _moved(graph, tier, d, which=None):
    h = graph.copy()
    for i, (*_, e) in enumerate(h.edges(data=True)):
        if e["tier"] == tier and (which is None or i == which):
            e["capacity"] += d
    return h


def _central(graph, size, tier, which=None):
    """Seconds saved per GB/s added to every link of ``tier`` (or the link ``which`` alone)."""
    return (_time(_moved(graph, tier, -H, which), size) - _time(_moved(graph, tier, H, which), size)) / (2 * H / 1e9)


@pytest.mark.parametrize("size", [2**22, 2**28])
def test_the_nic_tier_s_derivative_of_an_nvls_tree_all_reduce_is_the_central_difference(size):
    g = tp.rail_optimized(nodes=2)                 # 2 x DGX H100, 8 NDR rails
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fs.collective(g, "all_reduce", size)
    assert r.algorithm == "nvls_tree"
    table = r.sensitivity()
    tiers = table[table.group_by == "tier"].set_index("group")["saved_s_per_GBps"]
    access, nvlink = _central(g, size, "access"), _central(g, size, "nvlink")
    assert access > 4e-7                           # the NICs move the time: not a constant cap
    assert tiers["access"] == pytest.approx(access, rel=1e-8)
    assert tiers["nvlink"] == pytest.approx(nvlink, rel=1e-8)
    if size == 2**28:                              # the tester's figure: the NICs' slope 74 % of NVLink's
        assert access / nvlink == pytest.approx(0.736, abs=0.005)


def test_one_nic_cable_alone_is_held_by_the_other_server_s_nics():
    # net_bw is the least server's NICs: one cable raised leaves the other server's least
    # (right derivative 0), lowered lowers it (left derivative: the lowered server alone)
    g = tp.rail_optimized(nodes=2)
    size = 2**28
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fs.collective(g, "all_reduce", size)
    cable = next(i for i, (u, v, e) in enumerate(g.edges(data=True))
                 if e["tier"] == "access" and g.nodes[u].get("kind") == "nic")
    t0 = _time(g, size)
    up = (t0 - _time(_moved(g, "access", H, cable), size)) / (H / 1e9)
    down = (_time(_moved(g, "access", -H, cable), size) - t0) / (H / 1e9)
    assert up == pytest.approx(0.0, abs=1e-12)
    assert down > 1e-8
    assert -r.time_gradient("up")[cable] * 1e9 == pytest.approx(up, abs=1e-12)
    assert -r.time_gradient("down")[cable] * 1e9 == pytest.approx(down, rel=1e-5)     # one-sided: first order


def test_what_if_s_linear_estimate_for_the_nics_follows_the_derivative():
    g = tp.rail_optimized(nodes=2)
    size = 2**28
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = fs.what_if(g, dict(op="all_reduce", size=size), tier_upgrades(g)).set_index("upgrade")
    row = df.loc["access"]
    added = np.mean([e["capacity"] for *_, e in g.edges(data=True) if e["tier"] == "access"]) / 1e9   # x2: +50 GB/s
    assert row["linear_s"] == pytest.approx(row["time_s"] - _central(g, size, "access") * added, rel=1e-8)
    assert row["saved_s"] > 40e-6                  # the re-solve saves 44.6 us
