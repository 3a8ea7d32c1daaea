"""PXN relays only through the communicator's GPUs: NCCL builds its topology from the
communicator's ranks alone (src/graph/topo.cc), and its PXN loop relays a GPU's traffic to
NIC n through ncclTopoGetLocalGpu(n) of that topology (src/graph/paths.cc), so a NIC whose
local GPU is not in the communicator is reached by no relay: the GPU sends by its own rail."""

import numpy as np
import pytest

import topologies as tp
import flowsolver as fs
from flowsolver import Flows, route

# GPUs 0-3 of server 0 and GPUs 4-7 of server 1 (a scheduler's half-free servers): every
# cross-server pair is cross-rail, and no member sits on the other end's rail
HALVES = [0, 1, 2, 3, 12, 13, 14, 15]


def _gpu_links_used(result, members):
    """GPU nodes outside ``members`` whose outgoing links carry traffic."""
    links, used = result.links, result.link_utilization
    return {str(links.src[i]) for i in np.flatnonzero(used > 0) if "/gpu" in str(links.src[i])} - members


def test_a_relay_outside_the_communicator_is_not_used():
    g = tp.rail_optimized(2)
    # GPU 0 of server 0 to GPU 12 (server 1, rail 4): PXN relays through s0/gpu4, unless it is not a member
    every = route(g, Flows([0], [12], 1e6), pxn=True)
    members = route(g, Flows([0], [12], 1e6), pxn=True, relays=HALVES)
    plain = route(g, Flows([0], [12], 1e6), pxn=False)
    names = lambda rm: {(str(rm.links.src[i]), str(rm.links.dst[i])) for i in rm.column(0)[0]}     # noqa: E731
    assert ("s0/gpu0", "s0/nvswitch") in names(every) and any("s0/gpu4" in a for a, _ in names(every))
    assert names(members) == names(plain) and not any("s0/gpu4" in a + b for a, b in names(members))
    # a member on the other end's rail still relays
    assert names(route(g, Flows([0], [12], 1e6), pxn=True, relays=[0, 4, 12])) == names(every)


def test_relays_need_pxn_and_name_gpus():
    g = tp.rail_optimized(1)
    with pytest.raises(ValueError, match="it needs pxn=True"):
        route(g, Flows([0], [1], 1.0), relays=[0, 1])
    with pytest.raises(ValueError, match=r"relays\[1\]: rank 99"):
        route(g, Flows([0], [1], 1.0), pxn=True, relays=[0, 99])


@pytest.mark.parametrize("op", ["all_to_all", "all_gather"])
def test_a_collective_on_half_servers_takes_no_relay_outside_it(op):
    g = tp.rail_optimized(2)
    members = {tp.gpus(g)[r] for r in HALVES}
    on, off = (fs.collective(g, op, 2**26, ranks=HALVES, pxn=p) for p in (True, False))
    assert not _gpu_links_used(on, members)
    # no cross-server pair has a member relay: PXN changes nothing
    assert on.time == pytest.approx(off.time, rel=1e-12)
    # whole servers: the relays are members and PXN keeps cross-rail all-to-all traffic off the spines
    whole = fs.collective(g, "all_to_all", 2**26, pxn=True)
    assert _gpu_links_used(whole, set(tp.gpus(g))) == set()


def test_groups_in_lockstep_are_each_their_own_communicator():
    # pairs 0 -> 12 (s0/gpu0 -> s1/gpu4) and 4 -> 8 (s0/gpu4 -> s1/gpu0) at once: each pair alone
    # leaves by a NIC of its own, so together they take what each takes alone; relaying one
    # pair through the other's GPU (and NIC) would put both on one NIC, twice as long
    g = tp.rail_optimized(2)
    alone = [fs.collective(g, "send_recv", 2**28, ranks=r).time for r in ([0, 12], [4, 8])]
    both = fs.concurrent(g, [dict(op="send_recv", size=2**28, ranks=[0, 12]),
                             dict(op="send_recv", size=2**28, ranks=[4, 8])], lockstep=True)
    assert both.together == pytest.approx(tuple(alone), rel=1e-3)


@pytest.mark.parametrize("bad, said", [(["s0/nic4"], "'s0/nic4' is not a GPU"), ([True], "got True"),
                                       ([4.0], "got 4.0")])
def test_relays_that_are_no_gpu_are_refused(bad, said):
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=said):
        route(g, Flows([0], [12], 1.0), pxn=True, relays=bad)


def test_a_send_s_communicator_may_be_given_as_node_ids():
    g = tp.rail_optimized(2)
    ids = [tp.gpus(g)[r] for r in (0, 12, 4)]
    assert fs.collective(g, "send_recv", 2**20, ranks=ids).time == pytest.approx(
        fs.collective(g, "send_recv", 2**20, ranks=[0, 12, 4]).time, rel=1e-12)


def test_no_relay_to_a_nic_on_the_cpu():
    # ALCF Polaris: both NICs on the CPU's root ports, PHB or SYS from every GPU (its device-affinity
    # table); NCCL's PXN relays only through a GPU whose path to the NIC is PXB at most (paths.cc, the
    # PXN loop), which no GPU has: GPU 0 (rail 0) sends to GPU 6 (server 1, rail 1) by its own NIC,
    # pxn or not. The same mesh with each NIC under its first GPU relays through s0/gpu2 to NIC 1.
    names = lambda rm: {(str(rm.links.src[i]), str(rm.links.dst[i])) for i in rm.column(0)[0]}     # noqa: E731
    polaris = tp.rail_optimized(2, server="polaris_a100")
    relayed = route(polaris, Flows([0], [6], 1e6), pxn=True)
    assert names(relayed) == names(route(polaris, Flows([0], [6], 1e6), pxn=False))
    assert ("s0/cpu0", "s0/nic0") in names(relayed) and not any("gpu2" in a or "gpu1" in a for a, _ in names(relayed))
    near = tp.rail_optimized(2, server=tp.get_server("polaris_a100").with_(nics_on="gpu"))
    assert {("s0/gpu0", "s0/gpu2"), ("s0/gpu2", "s0/nic1")} <= names(route(near, Flows([0], [6], 1e6), pxn=True))


@pytest.mark.parametrize("bad", [1, "s0/gpu1", 2.5])
def test_relays_must_be_a_sequence(bad):
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=r"relays must be a sequence of GPU ranks or GPU node ids .* got "):
        route(g, Flows([0], [9], 1e6), pxn=True, relays=bad)


@pytest.mark.parametrize("bad, said", [([0, 99], r"relays\[1\]: rank 99 is not a GPU rank of this graph \(0 ... 15\)"),
                                       (["s9/gpu0"], r"relays\[0\]: 's9/gpu0' is not a node")])
def test_a_relay_out_of_range_is_named_as_the_relay(bad, said):
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=said) as caught:
        route(g, Flows([0], [9], 1e6), pxn=True, relays=bad)
    assert "flow" not in str(caught.value)


def test_groups_in_lockstep_relay_through_any_gpu_as_the_docs_say():
    # docs/concepts.md: groups solved in lockstep, each its own communicator, relay through every GPU
    # (ANY_RELAY). Ranks (0, 9) (s0/gpu0 -> s1/gpu1, cross-rail) and (1, 17) (s0/gpu1 -> s2/gpu1, rail 1):
    # NCCL's communicator {0, 9} has no GPU on rail 1 of server 0, so it leaves by NIC 0 and the pairs
    # share no link; the model in lockstep relays (0, 9) through s0/gpu1 onto s0/nic1, which (1, 17)
    # leaves by too: the two share that NIC, each at most half of it, where apart or without PXN each
    # has a NIC of its own
    g = tp.rail_optimized(3)
    groups = [dict(op="send_recv", size=2**30, ranks=[0, 9]), dict(op="send_recv", size=2**30, ranks=[1, 17])]
    alone = fs.collective(g, "send_recv", 2**30, ranks=[0, 9]).time
    locked = fs.concurrent(g, groups, lockstep=True)
    assert fs.concurrent(g, groups, lockstep=False).makespan == pytest.approx(alone, rel=1e-3)
    assert fs.concurrent(g, groups, lockstep=True, pxn=False).makespan == pytest.approx(alone, rel=1e-3)
    assert locked.makespan > 1.5 * alone
