"""The collective algorithm registry: a toy algorithm registered as a user would (the root
conftest.py restores the registry after every test), timed against a hand count."""

import pytest

import topologies as tp
import flowsolver as fs


def star(p, size, layout, chunk):
    """All-reduce through rank 0: every rank sends its buffer to rank 0, which sends the
    result back to every rank."""
    return ((1, [(i, 0, size) for i in range(1, p)], 1),
            (1, [(0, i, size) for i in range(1, p)], 1))


def test_a_registered_algorithm_runs_and_competes_in_auto():
    g, p, size = tp.fat_tree(4), 4, 2.0**20
    fs.register_algorithm("star", {"all_reduce": star})
    assert fs.ALGORITHMS["all_reduce"][-1] == "star" and "star" not in fs.NCCL_ALGORITHMS["all_reduce"]
    r = fs.collective(g, "all_reduce", size, ranks=list(range(p)), algorithm="star", efficiency=1.0,
                      step_latency=0.0, base_latency=0.0)
    # by hand: the p - 1 buffers share rank 0's NIC link one way, then the other way; its
    # rate is the slowest link between GPU 0 and its edge switch (NIC -> GPU is PCIe here)
    gpu = tp.gpus(g)[0]
    nic = next(iter(g.predecessors(gpu)))
    edge = min(g.edges[u, nic]["capacity"] for u in g.predecessors(nic) if u != gpu)
    rate = min(edge, g.edges[nic, gpu]["capacity"])
    assert r.algorithm == "star"
    assert r.time == pytest.approx(2 * (p - 1) * size / rate, rel=1e-9)
    # "auto" weighs it (solved, or pruned: its lower bound is above the time picked)
    auto = fs.collective(g, "all_reduce", size, ranks=list(range(p)), candidates="all", efficiency=1.0)
    assert auto.algorithm != "star"
    assert "star" in auto.candidates or auto.pruned["star"] > auto.time


def test_algorithm_registry_checks():
    with pytest.raises(ValueError, match="op must be one of all_reduce"):
        fs.register_algorithm("x", {"allreduce": star})
    with pytest.raises(ValueError, match="needs nccl_model=True"):
        fs.register_algorithm("x", {"all_reduce": None})
    with pytest.raises(ValueError, match="nccl_model=True needs NCCL's tuning constants"):
        fs.register_algorithm("x", {"all_reduce": star}, nccl_model=True)
    with pytest.raises(ValueError, match="algorithm for all_reduce must be 'auto' or one of ring, tree"):
        fs.collective(tp.fat_tree(4), "all_reduce", 1.0, algorithm="star")


@pytest.mark.parametrize("steps, match", [
    (lambda p, s, l, c: ((1, [(0, 1, s)], -100),), "latency count >= 0"),      # gave a negative time, picked
    (lambda p, s, l, c: ((1, [(0, -1, s)], 1),), "rank position -1, not in 0 ... 15"),     # was rank 15
    (lambda p, s, l, c: ((1, [(0, p, s)], 1),), "rank position 16"),
    (lambda p, s, l, c: (), "returned no steps"),
    (lambda p, s, l, c: ((1, [], 1),), "step 0 has no flows"),
    (lambda p, s, l, c: ((2.5, [(0, 1, s)], 1),), "count must be an integer >= 1"),
])
def test_a_registered_schedules_steps_are_checked(steps, match):
    fs.register_algorithm("mine", {"broadcast": steps})
    with pytest.raises(ValueError, match=match):
        fs.collective(tp.rail_optimized(2), "broadcast", 2**20, algorithm="mine")


def test_a_built_in_algorithm_cannot_be_replaced():
    # re-registering "ring" took it out of all_gather and NCCL's list, for the whole process
    with pytest.raises(ValueError, match="name 'ring' is a built-in algorithm"):
        fs.register_algorithm("ring", {"broadcast": lambda p, s, l, c: ((1, [(0, 1, s)], 1),)})
    assert "ring" in fs.NCCL_ALGORITHMS["all_gather"]


def test_an_algorithm_of_the_librarys_schedule_functions_is_a_users():
    # built-in was read off the functions' module: a user's "myring" skipped the checks and
    # could not be registered again ("is a built-in algorithm")
    from flowsolver.collectives._algorithms import algorithm_of
    ring_ag = algorithm_of("ring").schedules["all_gather"]
    fs.register_algorithm("myring", {"all_gather": ring_ag})
    fs.register_algorithm("myring", {"all_gather": ring_ag})
    assert not algorithm_of("myring").builtin and algorithm_of("ring").builtin


def test_an_algorithm_registered_again_runs_its_new_schedule():
    # the kept schedules were keyed by name: the old star's steps were timed after star2 replaced it
    g = tp.rail_optimized(1)

    def star(scale):
        return lambda p, s, l, c: ((1, [(i, 0, scale * s) for i in range(1, p)], 1),
                                   (1, [(0, i, scale * s) for i in range(1, p)], 1))
    fs.register_algorithm("star_again", {"all_reduce": star(1)})
    one = fs.collective(g, "all_reduce", 2**20, algorithm="star_again").time
    fs.register_algorithm("star_again", {"all_reduce": star(2)})
    again = fs.collective(g, "all_reduce", 2**20, algorithm="star_again").time
    fs.register_algorithm("star_twice", {"all_reduce": star(2)})
    assert again == pytest.approx(fs.collective(g, "all_reduce", 2**20, algorithm="star_twice").time, rel=1e-12)
    assert again > one
