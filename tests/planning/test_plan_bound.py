"""The plan search's lower bound with its send / receive floor (the latency and the transfer at
the links' efficiencies of PP's sends and CP's ring steps): never above the exact step."""

import pytest

import topologies as tp
from flowsolver import ModelSpec, plan, training_step
from flowsolver.planning import layout_space
from flowsolver.planning._bound import CutBound

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
    # LL's latencies (6.6 us base, 0.6 us NVLink hop), the least of the protocols under "auto"
    for protocol in ("LL", "auto"):
        assert CutBound(g, dict(protocol=protocol)).send_latency == pytest.approx(7.2e-6)
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


def test_a_protocol_list_bounds_a_send_by_the_least_of_its_protocols():
    # collective_options' protocol may name several (NCCL's choice among them): the least
    # latency a send pays is the least over those protocols' (it failed: min() of nothing)
    g = tp.rail_optimized(nodes=2)
    one = {p: CutBound._send_floor(g, dict(protocol=p))[0] for p in ("LL", "LL128", "Simple")}
    for names in (("LL", "Simple"), ("LL128", "Simple"), ("LL", "LL128", "Simple")):
        assert CutBound._send_floor(g, dict(protocol=names))[0] == min(one[p] for p in names)
