"""The plan search's lower bound with its send / receive floor (the latency and the transfer at
the links' efficiencies of PP's sends and CP's ring steps): never above the exact step."""

import pytest

import topologies as tp
from flowsolver import ModelSpec, plan, training_step
from flowsolver.collectives import concurrent_kinds, kind_floors
from flowsolver.planning import layout_space
from flowsolver.planning._bound import CutBound, layout_groups

# 2 layers, 4 heads: every TP and CP degree below divides them; small enough to time every layout
TOY = ModelSpec("toy", layers=2, hidden=512, ffn=2048, heads=4, kv_heads=4, vocab=1024, seq_len=1024)


def test_send_floor_by_hand():
    # TP8 CP2 on two DGX H100 servers: every CP ring step is each GPU's chunk to the same GPU
    # of the other server, over its NIC (8 NICs a server, 50 GB/s each at 94 % efficiency in
    # the catalogue, read from the graph below); NCCL's Simple base latency 8.4 us and its
    # smallest hop (NVLink, Simple) 3.4 us (NCCL 2.30 tuning.cc)
    g = tp.rail_optimized(2)
    (nic_link,) = [d for _, v, d in g.out_edges("s0/nic0", data=True) if v.startswith("su")]
    rate = nic_link["capacity"] * nic_link["efficiency"]
    size = 2 ** 20
    key = (8, 2, 1, 1, 1, ("tp", "cp", "dp", "pp"))
    assert CutBound(g).seconds("send_recv", size, key, "cp_step") == pytest.approx(8.4e-6 + 3.4e-6 + size / rate)
    # a step_latency override replaces the hop latency, a base_latency the base
    custom = CutBound(g, dict(step_latency=1e-6, base_latency=2e-6))
    assert custom.seconds("send_recv", size, key, "cp_step") == pytest.approx(3e-6 + size / rate)
    # whatever the protocol, Simple's 8.4 + 3.4 us: NCCL_PROTO does not govern sends, which the
    # exact step times as Simple (under LL128 the floor was LL128's 14.0 + 1.9 = 15.9 us, above
    # the exact NVLink send's 11.8 us)
    for protocol in ("LL", "LL128", "Simple", "auto", ("LL", "Simple"), ("LL", "LL128")):
        assert CutBound(g, dict(protocol=protocol)).send_latency == pytest.approx(8.4e-6 + 3.4e-6), protocol
    # under a calibration model the floor is left out: the raw cut (S over the NIC's 50 GB/s)
    assert CutBound(g, dict(model=object())).send_latency == 0.0


@pytest.mark.slow          # ~5 s of CPU: every feasible layout (40) solved on 16 GPUs
def test_bound_below_exact_step_for_every_layout_with_cp_and_tp():
    # every feasible layout with CP and TP > 1 (CP rings inside and across the two servers,
    # PP sends across them), each bound below its exact step, and each bound profile's
    # send / receive below the exact one's per call
    g = tp.rail_optimized(2)
    grid = dict(tp=(2, 4), cp=(2, 4), pp=(1, 2), vp=1, ep=1, micro_batch=1, recompute=("selective", "none"),
                zero=1, sequence_parallel=(False, True), orders=("tp-cp-dp-pp", "tp-dp-cp-pp"))
    space = layout_space(TOY, 16, 8, gpu_memory=80e9, attention="auto", **grid)     # the step's, as plan
    assert len(space.feasible) >= 16
    p = plan(g, model=TOY, global_batch=8, top=len(space.feasible), **grid)
    assert len(p.timed) == len(space.feasible) and p.proven
    cut = CutBound(g)
    floor = 8.4e-6 + 3.4e-6
    exposed_cp = 0
    for row in p.timed:
        assert row.bound <= row.step_time
        lay = row.layout
        key = (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.order)
        comms = row.result.profile.comms
        for name in ("cp_step", "pp"):
            if name in comms:
                bound = cut.seconds("send_recv", comms[name].bytes, key, name)
                assert floor <= bound <= comms[name].per_call
        exposed_cp += row.result.phases["cp"].exposed > 0
    assert exposed_cp          # the CP exposure the bound now counts is there in exact steps
    for row in p.timed[:4]:   # the plan's exact steps are training_step's
        assert row.step_time == training_step(g, model=TOY, global_batch=8, **row.layout.step_kwargs()).step_time


def test_a_send_s_floor_is_below_its_exact_time_under_every_protocol():
    # one send of each size inside a server (NVLink) and across two (the NICs), timed exactly
    # as the training step times a kind (concurrent_kinds, lockstep); its floor never above it.
    # Under LL128 the floor was 15.9 us + the transfer, above the exact 11.8 us NVLink send
    g = tp.rail_optimized(nodes=2)
    pairs = {"nvlink": (4, 1, 2, 1, 1, ("tp", "cp", "dp", "pp")),        # PP pairs (i, i + 4), one server
             "network": (8, 1, 2, 1, 1, ("tp", "cp", "dp", "pp"))}      # PP pairs (i, i + 8), two
    for protocol in ("LL", "LL128", "Simple", "auto", ("LL", "LL128"), ("LL128", "Simple")):
        cut = CutBound(g, dict(protocol=protocol))
        for name, key in pairs.items():
            groups = layout_groups(key, "pp").tolist()
            for size in (2.0 ** 10, 2.0 ** 20):
                exact = concurrent_kinds(g, [[dict(op="send_recv", size=size, ranks=r) for r in groups]],
                                         protocol=protocol)[0].makespan
                assert 11.8e-6 < cut.seconds("send_recv", size, key, "pp") <= exact, (protocol, name, size)


def test_an_all_to_all_s_floor_is_simple_s_under_every_protocol():
    # EP's all-to-all runs Simple whatever the protocol, as a send does: its floor is
    # kind_floors' at Simple (under LL / LL128 kind_floors refuses the all-to-all, which left EP
    # with the cut alone), never above the exact lockstep time under that protocol
    g = tp.rail_optimized(nodes=2)
    key = (1, 1, 1, 16, 2, ("tp", "cp", "dp", "pp"))            # EP pairs (0, 1), (2, 3), ...
    groups = layout_groups(key, "ep").tolist()
    assert groups[0] == [0, 1]
    for size in (2.0 ** 10, 2.0 ** 24):
        simple = min(kind_floors(g, "all_to_all", size, groups[0], protocol="Simple").values())
        assert simple >= 8.4e-6 + 3.4e-6
        for protocol in ("LL", "LL128", "auto"):
            floor, _ = CutBound(g, dict(protocol=protocol)).floor("all_to_all", size, key, "ep", "auto")
            exact = concurrent_kinds(g, [[dict(op="all_to_all", size=size, ranks=r) for r in groups]],
                                     protocol=protocol)[0].makespan
            assert floor == simple and floor <= exact, (protocol, size)


# one DGX H100, a long sequence (CP's ring steps and PP's sends inside NVLink matter): the
# tester's space where the LL128 send floor put the bound of CP4 PP2 at 7.489 ms over its
# exact 7.050 ms, and a top-1 "proven" plan returned TP4 CP2 (7.244 ms) instead
SMALL = ModelSpec("small", layers=16, hidden=512, ffn=2048, heads=8, kv_heads=8, vocab=32000, seq_len=4096)
SMALL_GRID = dict(tp=(1, 2, 4, 8), cp=(1, 2, 4, 8), pp=(1, 2, 4), vp=(1, 2), ep=1, zero=1, recompute="selective",
                  micro_batch=1, sequence_parallel=True, orders="tp-cp-dp-pp")


@pytest.mark.slow          # ~10 s of CPU: every feasible layout (9) timed twice per protocol on 8 GPUs
@pytest.mark.parametrize("protocol", ["LL128", "LL"])
def test_bound_below_exact_and_proven_top_equals_brute_force_under_ll_protocols(protocol):
    g = tp.rail_optimized(1)
    options = dict(protocol=protocol)
    feasible = layout_space(SMALL, 8, 1, gpu_memory=80e9, attention="auto", **SMALL_GRID).feasible
    # tp x cp x pp = 8 GPUs: 4 pairs at pp 1, 3 at pp 2, 2 at pp 4; one microbatch, so no
    # interleaving (vp 2 needs at least pp microbatches, Megatron-Core's interleaved schedule)
    assert len(feasible) == 4 + 3 + 2
    brute = sorted((training_step(g, model=SMALL, global_batch=1, collective_options=options,
                                  **lay.step_kwargs()).step_time, lay.label) for lay in feasible)
    every = plan(g, model=SMALL, global_batch=1, top=len(feasible), collective_options=options, **SMALL_GRID)
    assert len(every.timed) == len(feasible)
    for row in every.timed:
        assert row.bound <= row.step_time, (row.layout.label, row.bound, row.step_time)
    for top in (1, 3):       # one profile a batch: the bound, not the batch, decides what is timed
        p = plan(g, model=SMALL, global_batch=1, top=top, prefetch=1, collective_options=options, **SMALL_GRID)
        assert p.proven
        assert [(row.step_time, row.layout.label) for row in p.rows] == brute[:top]
