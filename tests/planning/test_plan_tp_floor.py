"""The plan search's floor under TP collectives (NCCL's own formula on the least transfers
through the GPUs' links, ``flowsolver.collectives.kind_floors``): each entry below the time
the exact solve gives that entry, under every protocol and option set, and the plan's bound
with it never above the exact step."""

import pytest

import topologies as tp
from flowsolver import ModelSpec, plan
from flowsolver.collectives import concurrent_kinds, kind_floors
from flowsolver.collectives._pipeline import PIPELINE
from flowsolver.planning import layout_space
from flowsolver.planning._bound import CutBound

TOY = ModelSpec("toy", layers=2, hidden=1024, ffn=4096, heads=8, kv_heads=8, vocab=1024, seq_len=2048)


def _effective(d):
    return d["capacity"] * d["efficiency"]


def test_ring_floor_by_hand():
    # TP8 reduce-scatter of 128 MiB in one DGX H100: NCCL's ring Simple latency 8.4 us base
    # + 7 NVLink hops of 3.4 us (NCCL 2.30 tuning.cc); the ring's 7 steps each move S / 8
    # out of every GPU, whose links pass at most the NVLink's effective rate plus what its
    # PCIe link can hand on through the NIC (the NIC's uplink): the least ring transfer
    # 7 S / 8 / rate. NCCL's bus bandwidth is then S (7/8) / transfer, its algbw 8/7 of it =
    # S / transfer; at 128 MiB on NCCL's 24 channels one loop of 7 chunk steps (2 MiB chunks) plus
    # the fitted fill: latency + (7 + fill) x transfer / 7, the transfer that of the largest
    # channel's share: a rank's 16 MiB in 4 KiB cells (32 KiB of traffic at 8 bytes a byte), 171
    # cells a channel (ceil(16 MiB x 8 / 24 / 32 KiB)), so 24 x 171 x 4 KiB / 16 MiB of the mean.
    g = tp.rail_optimized(1)
    gpu = tp.gpus(g)[0]
    (nvl,) = [d for _, v, d in g.out_edges(gpu, data=True) if "nvswitch" in v]
    (pcie,) = [(v, d) for _, v, d in g.out_edges(gpu, data=True) if "nic" in v]
    nic, d_pcie = pcie
    nic_out = sum(_effective(d) for _, w, d in g.out_edges(nic, data=True) if w != gpu)
    rate = _effective(nvl) + min(_effective(d_pcie), nic_out)
    size = float(2 ** 27)
    transfer = 7 * size / 8 / rate * (24 * 171 * 4096 / 2 ** 24)
    expected = (8.4 + 7 * 3.4) * 1e-6 + (7 + PIPELINE.fill_ring) * transfer / 7
    floors = kind_floors(g, "reduce_scatter", size, range(8))
    assert floors["ring", "Simple"] == pytest.approx(expected, rel=1e-12)
    exact = concurrent_kinds(g, [[dict(op="reduce_scatter", size=size, ranks=range(8))]])[0].lockstep
    assert min(floors.values()) <= exact.time
    assert floors["ring", "Simple"] <= exact.choices["ring/Simple"]


GROUPS = {"tp8": [list(range(8)), list(range(8, 16))], "tp4": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]],
          "tp2 across": [[0, 8], [1, 9]]}
OPTIONS = {"default": {}, "auto": dict(protocol="auto"), "LL": dict(protocol="LL"), "LL128": dict(protocol="LL128"),
           "alpha-beta": dict(step_latency=2e-6), "base and efficiency": dict(base_latency=1e-6, efficiency=0.5)}


@pytest.mark.parametrize("options", list(OPTIONS), ids=list(OPTIONS))
def test_every_entry_floor_below_its_exact_time(options):
    # every (algorithm, protocol) entry auto's pick can land on, its floor <= the time the
    # exact lockstep solve gives it (the pick's `choices`), and the least floor <= the pick
    g = tp.rail_optimized(2)
    kw = OPTIONS[options]
    for name, groups in GROUPS.items():
        for op in ("reduce_scatter", "all_gather", "all_reduce"):
            for size in (2.0 ** 16, 2.0 ** 25):
                for algorithm in ("auto", "ring"):
                    floors = kind_floors(g, op, size, groups[0], algorithm, **kw)
                    exact = concurrent_kinds(g, [[dict(op=op, size=size, ranks=r, algorithm=algorithm)
                                                  for r in groups]], **kw)[0].lockstep
                    case = (name, op, size, algorithm)
                    assert {f"{a}/{p}" for a, p in floors} >= set(exact.choices), case
                    for (a, p), seconds in floors.items():
                        if f"{a}/{p}" in exact.choices:
                            assert seconds <= exact.choices[f"{a}/{p}"] * (1 + 1e-12), (case, a, p)
                    assert 0 < min(floors.values()) <= exact.time * (1 + 1e-12), case


@pytest.mark.slow          # ~10 s of CPU: every feasible layout (TP 2-8, with and without SP) solved on 16 GPUs
@pytest.mark.parametrize("options", [None, dict(protocol="auto")], ids=["Simple", "auto"])
def test_bound_below_exact_step_for_every_layout_with_tp(options):
    # every feasible layout with TP > 1 timed exactly: its bound <= its step, and the bound
    # profile's TP per-call and gather <= the exact ones; the floor is what sets the TP
    # bound (above the cut) in most layouts
    g = tp.rail_optimized(2)
    grid = dict(tp=(2, 4, 8), cp=1, pp=(1, 2), vp=1, ep=1, micro_batch=(1, 2), recompute="selective", zero=(1, 3),
                sequence_parallel=(False, True), orders=("tp-cp-dp-pp", "tp-dp-pp-cp"))
    space = layout_space(TOY, 16, 16, gpu_memory=80e9, **grid)
    assert len(space.feasible) >= 24
    kw = {} if options is None else dict(collective_options=options)
    p = plan(g, model=TOY, global_batch=16, top=len(space.feasible), **grid, **kw)
    assert len(p.timed) == len(space.feasible) and p.proven
    cut, plain = CutBound(g, options), CutBound(g, dict(model=object()))
    raised = dp_floors = 0
    for row in p.timed:
        assert row.bound <= row.step_time
        lay = row.layout
        key = (lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.order)
        exact = row.result.profile.comms["tp"]
        floor, gather = cut.floor(exact.op, exact.bytes, key, "tp", "auto",
                                  exact.bytes if exact.op == "reduce_scatter" else None)
        assert floor <= exact.per_call and gather <= exact.gather
        raised += floor > plain.seconds(exact.op, exact.bytes, key, "tp")
        # the DP collectives' floors (ZeRO 1: a reduce-scatter and its all-gather of the
        # parameters; ZeRO 3 also one layer's all-gather and reduce-scatter) below the exact ones
        for name, comm in row.result.profile.comms.items():
            if name.startswith("dp"):
                gather_size = comm.bytes if name == "dp" and comm.op == "reduce_scatter" else None
                floor, gather = cut.floor(comm.op, comm.bytes, key, "dp", "auto", gather_size)
                assert floor <= comm.per_call and gather <= comm.gather, (lay.label, name)
                dp_floors += floor > 0
    assert raised >= len(p.timed) // 2 and dp_floors
