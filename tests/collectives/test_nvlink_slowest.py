"""NCCL's cost model sees the NVLink bandwidth of the slowest of the communicator's GPUs
(its search reserves each channel's bandwidth on the links of every GPU it passes,
src/graph/search.cc), not rank 0's: a slow NVLink costs the same wherever it sits and
whichever GPU is rank 0, and the derivatives say so."""

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp

GIB = 2 ** 30


def _slowed(g, gpu, factor):
    h = g.copy()
    switch = gpu.split("/")[0] + "/nvswitch"
    h[gpu][switch]["capacity"] *= factor
    return h


@pytest.fixture(scope="module")
def healthy():
    return tp.rail_optimized(2)


def test_a_slow_nvlink_costs_the_same_on_any_gpu_and_under_any_rank_order(healthy):
    names = tp.gpus(healthy)
    base = fs.collective(healthy, "all_reduce", GIB).time
    slow = {gpu: fs.collective(_slowed(healthy, gpu, 0.7), "all_reduce", GIB).time
            for gpu in ("s0/gpu0", "s0/gpu3", "s1/gpu5")}
    # the 16 GPUs' NVLinks are alike (DGX H100 x 2): which one is slow cannot matter
    assert slow["s0/gpu3"] == pytest.approx(slow["s0/gpu0"], rel=1e-9)
    assert slow["s1/gpu5"] == pytest.approx(slow["s0/gpu0"], rel=1e-9)
    assert slow["s1/gpu5"] > base * 1.05           # and it does cost (was +0 % off rank 0)
    g = _slowed(healthy, "s1/gpu5", 0.7)
    first = [names.index("s1/gpu5")] + [i for i in range(16) if names[i] != "s1/gpu5"]
    assert fs.collective(g, "all_reduce", GIB, ranks=first).time == pytest.approx(slow["s1/gpu5"], rel=1e-9)


def test_every_gpu_nvlink_carries_the_tuned_time_derivative_as_a_tie(healthy):
    r = fs.collective(healthy, "all_reduce", GIB)
    assert r.algorithm == "nvls_tree"              # NCCL's cost model sets the time
    edges = list(healthy.edges())
    nvlinks = [i for i, (u, v) in enumerate(edges) if v.endswith("/nvswitch") and "/gpu" in u]
    assert len(nvlinks) == 16
    down, up = r.time_gradient("down"), r.time_gradient("up")
    # a minimum over 16 equal NVLinks: lowering any one lowers it, raising one alone does not
    assert np.all(down[nvlinks] < 0) and np.allclose(down[nvlinks], down[nvlinks[0]], rtol=1e-9)
    assert np.all(up[nvlinks] == 0)
    # the left derivative against a one-sided finite difference on one GPU's NVLink
    u, v = edges[nvlinks[11]]
    h = 1e-4
    g = healthy.copy()
    cap = g[u][v]["capacity"]
    g[u][v]["capacity"] = cap * (1 - h)
    fd = (r.time - fs.collective(g, "all_reduce", GIB).time) / (cap * h)
    assert down[nvlinks[11]] == pytest.approx(fd, rel=1e-2)


def test_the_switch_to_gpu_direction_counts_too(healthy):
    # NCCL's NVLS search reserves bandwidth both ways on a GPU's NVLinks (ncclTopoSearchTryNvls):
    # halving either direction of s1/gpu5's link costs what halving the GPU's way costs
    def halved(u, v):
        g = healthy.copy()
        g[u][v]["capacity"] *= 0.5
        return fs.collective(g, "all_reduce", GIB).time

    assert halved("s1/nvswitch", "s1/gpu5") == pytest.approx(halved("s1/gpu5", "s1/nvswitch"), rel=1e-9)


def test_groups_in_lockstep_go_at_the_slowest_groups_nvlink():
    # two all-reduces at once (ranks 0-15 and 16-31 of 4 DGX H100): each group's NCCL sees its
    # own GPUs, and lockstep waits for the slower, so a slow NVLink costs the same in either group
    # and no less than that group alone
    g = tp.rail_optimized(4)
    groups = [list(range(16)), list(range(16, 32))]
    alone = fs.collective(_slowed(g, "s2/gpu3", 0.7), "all_reduce", GIB, ranks=groups[1]).time
    times = {}
    for gpu in ("s0/gpu3", "s2/gpu3"):
        r = fs.concurrent(_slowed(g, gpu, 0.7), [dict(op="all_reduce", size=GIB, ranks=ranks) for ranks in groups],
                          lockstep=True, alone=False, protocol="auto")
        times[gpu] = max(r.together)
    assert times["s2/gpu3"] == pytest.approx(times["s0/gpu3"], rel=1e-9)
    assert times["s2/gpu3"] >= alone * (1 - 1e-9)
