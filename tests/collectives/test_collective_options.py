"""flowsolver.CollectiveOptions: one record for the options of every collective entry point.

With both latencies at 0 a collective's time is its transfers alone, and every transfer is
bytes over a max-min rate proportional to the capacities: every link at half its raw rate
(efficiency 0.5) takes exactly twice as long as every link at its raw rate (efficiency 1).
That checks that each entry point applies the record's fields, not merely that it accepts
it."""

import dataclasses

import pytest

import topologies as tp
import flowsolver as fs
from flowsolver import CollectiveOptions, collective, collective_variants, concurrent
from flowsolver.collectives import concurrent_kinds

ZERO = dict(step_latency=0.0, base_latency=0.0)
RING = dict(op="all_reduce", size=2**24, algorithm="ring")


@pytest.fixture(scope="module")
def one_server():
    return tp.rail_optimized(nodes=1)


def test_it_is_public_frozen_and_checked_when_built():
    assert fs.CollectiveOptions is CollectiveOptions and "CollectiveOptions" in fs.__all__
    opts = CollectiveOptions(policy="ecmp_hash", policy_options={"subflows": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.policy = "ecmp"
    with pytest.raises(ValueError, match="CollectiveOptions: protocol must be 'auto' or one of LL, LL128, Simple"):
        CollectiveOptions(protocol="LL64")
    with pytest.raises(ValueError, match="CollectiveOptions: step_latency must be None or a finite number of seconds"):
        CollectiveOptions(step_latency=-1e-6)
    with pytest.raises(ValueError, match="CollectiveOptions: channels"):
        CollectiveOptions(channels=65)
    with pytest.raises(ValueError, match="model must be a Calibration"):
        CollectiveOptions(model="h100")


def test_collective_applies_every_field_as_its_keywords_do(one_server):
    full = collective(one_server, "all_reduce", 2**24, algorithm="ring",
                      options=CollectiveOptions(efficiency=1.0, **ZERO))
    half = collective(one_server, "all_reduce", 2**24, algorithm="ring",
                      options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert half.time == pytest.approx(2 * full.time, rel=1e-12)        # bytes over half the rate
    keywords = collective(one_server, "all_reduce", 2**24, algorithm="ring", efficiency=0.5, **ZERO)
    assert half.time == keywords.time
    variants = collective_variants([one_server, one_server], "all_reduce", 2**24, algorithm="ring",
                                   options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert [r.time for r in variants] == [half.time, half.time]


def test_options_and_keywords_together_are_refused(one_server):
    with pytest.raises(ValueError, match="either as options= or as keywords, not both \\(also got policy\\)"):
        collective(one_server, "all_reduce", 2**20, policy="ecmp_hash", options=CollectiveOptions())
    with pytest.raises(TypeError, match="options must be a flowsolver.CollectiveOptions, got dict"):
        collective(one_server, "all_reduce", 2**20, options={"policy": "ecmp"})


def test_concurrent_takes_the_record_and_refuses_per_collective_fields(one_server):
    specs = [dict(RING, ranks=range(4)), dict(RING, ranks=range(4, 8))]
    full = concurrent(one_server, specs, options=CollectiveOptions(efficiency=1.0, **ZERO))
    half = concurrent(one_server, specs, options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert half.together == pytest.approx([2 * t for t in full.together], rel=1e-12)
    assert half.together == concurrent(one_server, specs, efficiency=0.5, **ZERO).together
    kinds = concurrent_kinds(one_server, [specs], options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert kinds[0].makespan == concurrent_kinds(one_server, [specs], efficiency=0.5, **ZERO)[0].makespan
    with pytest.raises(ValueError, match="concurrent does not take CollectiveOptions.channels"):
        concurrent(one_server, specs, options=CollectiveOptions(channels=2))


def test_training_step_takes_the_record_as_collective_options(one_server):
    dict_form = fs.training_step(one_server, model="llama-3-8b", tp=8, global_batch=8,
                                 collective_options=dict(efficiency=0.5, **ZERO))
    record = fs.training_step(one_server, model="llama-3-8b", tp=8, global_batch=8,
                              collective_options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert record.step_time == dict_form.step_time
    with pytest.raises(ValueError, match="collective_options: a training step does not take "
                                         "CollectiveOptions.candidates"):
        fs.training_step(one_server, model="llama-3-8b", tp=8, collective_options=CollectiveOptions(candidates="all"))


def test_replay_takes_the_record(one_server):
    from flowsolver.traces import RankTrace, TraceNode, build_workload

    per_rank = [RankTrace(r, [TraceNode(0, "grads", "collective", op="all_reduce", bytes=2**24)]) for r in range(8)]
    work = build_workload(per_rank)
    full = fs.replay(one_server, work, algorithms={"all_reduce": "ring"},
                     options=CollectiveOptions(efficiency=1.0, **ZERO))
    half = fs.replay(one_server, work, algorithms={"all_reduce": "ring"},
                     options=CollectiveOptions(efficiency=0.5, **ZERO))
    assert half.iteration_time == pytest.approx(2 * full.iteration_time, rel=1e-12)
    with pytest.raises(ValueError, match="replay: pass the collective options either as options= or as keywords"):
        fs.replay(one_server, work, options=CollectiveOptions(), policy="ecmp")


def test_sweep_takes_the_record_for_what_the_grid_does_not_set(one_server):
    pytest.importorskip("pandas")
    grid = {"nodes": [1], "size": [2**24], "algorithm": ["ring"]}
    df = fs.sweep(grid, progress=False, cache_dir=None, options=CollectiveOptions(efficiency=0.5, **ZERO))
    alone = collective(one_server, "all_reduce", 2**24, algorithm="ring", efficiency=0.5, **ZERO)
    assert df["time"].tolist() == [alone.time]
    with pytest.raises(ValueError, match="sweep \\(the grid sets policy, subflows and channels\\) does not take "
                                         "CollectiveOptions.policy"):
        fs.sweep(grid, progress=False, cache_dir=None, options=CollectiveOptions(policy="ecmp_hash"))


def test_a_size_beyond_size_t_is_refused_naming_it():
    # NCCL counts bytes in size_t: 2**64 is the most a collective can move; 1e200 used to
    # reach a division by zero in the chunk pipeline
    import topologies as tp
    from flowsolver import collective
    g = tp.rail_optimized(1)
    assert collective(g, "all_reduce", 2.0 ** 64).time > 0
    with pytest.raises(ValueError, match=r"size must be at most 2\*\*64 bytes"):
        collective(g, "all_reduce", 1e200)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize("protocol", ["LL", "LL128"])
def test_broadcast_and_reduce_refuse_a_protocol_their_chain_does_not_model(op, protocol):
    # a 1 GiB broadcast forced to LL came out faster than Simple (368 against 365 GB/s on one
    # H100 server): LL's latency at Simple's bandwidth, where LL carries 8 bytes a 16-byte line
    import topologies as tp
    from flowsolver import collective
    g = tp.rail_optimized(1)
    with pytest.raises(ValueError, match=f"protocol for {op} must be 'auto' or 'Simple', got '{protocol}'"):
        collective(g, op, 2 ** 30, protocol=protocol)
    assert collective(g, op, 2 ** 30, protocol="Simple").time == collective(g, op, 2 ** 30).time


@pytest.mark.parametrize("op", ["send_recv", "all_to_all"])
@pytest.mark.parametrize("protocol", ["LL", "LL128", ["LL", "LL128"]])
def test_sends_refuse_a_protocol_nccl_does_not_let_them_run(op, protocol):
    # adv18a F3: send_recv / all_to_all forced to LL came out faster than Simple at 1 GiB (12708
    # against 12713 us on 2 x 8 H100), LL's latency at Simple's bandwidth. NCCL's p2p path takes no
    # NCCL_PROTO (src/enqueue.cc addP2pToPlan: LL only at <= 16 KiB a channel, never LL128)
    import topologies as tp
    from flowsolver import collective
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match=f"protocol for {op} must be 'auto' or 'Simple', got .*LL"):
        collective(g, op, 2 ** 20, protocol=protocol)
    # a list that allows Simple is NCCL's own choice, as "auto"
    assert collective(g, op, 2 ** 20, protocol=["LL", "Simple"]).time == collective(g, op, 2 ** 20).time


def test_the_result_says_how_many_channels_run_at_its_size():
    # NCCL (enqueue.cc topoGetAlgoInfo) drops a channel while nBytes < nc x 512 threads x 64
    # (Simple's thread threshold): on 2 x 8 H100 (16 channels) a tree Simple all-reduce of
    # 65,535 bytes runs 1 channel, 65,536 two, 1 MiB all 16 (65,536 x 16); `channels` stays the
    # communicator's 16 (what a failure what-if pins)
    import topologies as tp
    from flowsolver import collective
    g = tp.rail_optimized(2)
    runs = [collective(g, "all_reduce", s, algorithm="tree", protocol="Simple") for s in (65535, 65536, 1 << 20)]
    assert [r.channels for r in runs] == [16, 16, 16]
    assert [r.channels_run for r in runs] == [1, 2, 16]


def test_a_gpu_type_nccls_model_does_not_know_is_said_once():
    # 'h100-sxm' for 'h100_sxm' silently timed the server with no GPU generation (no NVLS, no
    # per-generation caps): a warning names it, once a process
    import warnings

    import topologies as tp
    from flowsolver import collective
    from flowsolver.collectives import _hardware
    g = tp.rail_optimized(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collective(g, "all_reduce", 2 ** 20)                 # a known type: nothing said
    for n in tp.gpus(g):
        g.nodes[n]["gpu_type"] = "h100-sxm-typo"
    _hardware._WARNED.discard("h100-sxm-typo")
    with pytest.warns(RuntimeWarning, match="GPU type 'h100-sxm-typo' has no NCCL generation"):
        collective(g, "all_reduce", 2 ** 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collective(g, "all_reduce", 2 ** 21)                 # said once


def test_ranks_mixing_gpu_types_are_said_once_at_the_callers_line():
    import topologies as tp
    from flowsolver import collective
    from flowsolver.collectives import _hardware
    g = tp.rail_optimized(1)
    g.nodes[tp.gpus(g)[0]]["gpu_type"] = "b200"          # one B200 among H100s: no one generation
    _hardware._WARNED.discard("b200+h100_sxm")
    with pytest.warns(RuntimeWarning, match=r"the ranks mix GPU types \['b200', 'h100_sxm'\]") as said:
        collective(g, "all_reduce", 2 ** 20)
    assert said[0].filename == __file__                  # the user's line, not the library's
