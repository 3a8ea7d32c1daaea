"""Expert tensor parallelism as its own setting (review20 F1): ``Parallelism(etp=1)`` is
Megatron-Core's ``expert_tensor_parallel_size = 1`` (NeMo's MoE recipes' ``etp_size 1``), ``None``
its default (= tp).

At expert TP 1 (NVIDIA/Megatron-LM d98e8a64):
* the all-to-all dispatcher's TP all-gather / reduce-scatter do not run (``if self.tp_size > 1``
  over ``expt_tp``, moe/token_dispatcher.py): no ``etp`` phase;
* the expert rank generator has tp = 1 (parallel_state.py: ``RankGenerator(tp=expert_tensor_
  parallel_size, ep=..., dp=world // (etp ep pp), cp=1)``), so an EP group is ``ep`` consecutive
  ranks of a stage, TP ranks included, and the expert DP group is ``tp dp cp / ep`` ranks;
* each expert is whole on its GPU: FFN not split, ``1 / tp`` of the routed tokens; its weights
  and gradients ``tp x`` those at expert TP = tp, its optimizer shard the same (over ``tp x``
  the expert DP ranks).

Every expected value is a hand count from the model's shape (Mixtral 8x7B: 32 layers, h 4096,
FFN 14336, 8 experts, top-2, s 4096) and collectives timed alone (flowsolver.collective)."""

import pytest

import topologies as tp
from flowsolver import Parallelism, Schedule, collective, training_step
from flowsolver.training import get_model
from flowsolver.training._kernel_costs import layer_kernel_costs
from flowsolver.training._kernels import gemm_seconds_shape
from flowsolver.training._layout import ParallelLayout
from flowsolver.training._memory import memory_breakdown
from flowsolver.traces import replay, workload_from_step

S, H, F, L, E, K = 4096, 4096, 14336, 32, 8, 2       # Mixtral 8x7B


@pytest.fixture(scope="module")
def both():
    g = tp.rail_optimized(2)                        # 2 DGX H100
    return g, {etp: training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8, etp=etp), Schedule(global_batch=32))
               for etp in (None, 1)}


def test_etp_1_runs_no_dispatcher_tp_collectives_and_its_ep_groups_span_the_tp_ranks(both):
    g, r = both
    two, one = r[None], r[1]
    assert two.profile.layout.etp == 2 and one.profile.layout.etp == 1
    assert "etp" in two.phases and "etp" not in one.phases and "etp" not in one.profile.comms
    # Megatron's expert rank generator at etp 1: runs of 8 consecutive ranks (one DGX each); at etp 2
    # the 8 DP ranks of one TP index (across both DGX)
    assert one.profile.layout.groups("ep") == [list(range(8)), list(range(8, 16))]
    assert two.profile.layout.groups("ep") == [list(range(0, 16, 2)), list(range(1, 16, 2))]
    # expert DP: 16 / (etp 1 x ep 8) = 2 ranks holding one shard (none at etp 2: 16 / (2 x 8) = 1)
    assert one.profile.layout.groups("dp_experts")[:2] == [[0, 8], [1, 9]]
    assert "dp_experts" not in two.profile.comms
    # the attention side keeps its 5 TP collectives a layer (SP), same bytes and calls
    m = one.microbatches
    assert one.phases["tp"].calls == two.phases["tp"].calls == 5 * L * m
    assert one.phases["tp"].exposed == pytest.approx(two.phases["tp"].exposed, rel=1e-12)
    # EP: each rank's s / tp tokens, top-2 copies, bf16: 4096 / 2 x 2 x 4096 x 2 bytes, 4 a layer
    ep_bytes = S // 2 * K * H * 2
    assert one.profile.comms["ep"].bytes == two.profile.comms["ep"].bytes == ep_bytes
    a2a = collective(g, "all_to_all", ep_bytes, ranks=list(range(8))).time      # inside one DGX
    assert one.phases["ep"].calls == 4 * L * m
    assert one.phases["ep"].exposed == pytest.approx(4 * L * m * a2a, rel=1e-9)


def test_etp_1_step_is_the_etp_2_step_less_its_etp_time_by_hand(both):
    g, r = both
    two, one = r[None], r[1]
    m = two.microbatches
    # the etp phase of etp 2 by hand: AG + RS of top_k x s x h x 2 bytes on a TP pair, 2 each a layer
    routed = K * S * H * 2
    assert routed == 67_108_864
    pair = {op: collective(g, op, routed, ranks=[0, 1]).time for op in ("all_gather", "reduce_scatter")}
    etp_time = 2 * L * m * (pair["all_gather"] + pair["reduce_scatter"])
    assert two.breakdown["etp"] == pytest.approx(etp_time, rel=1e-9)
    # the expert GEMMs carry the same FLOPs (m / 2 x 2 n): compute moves by the kernel tables' shape
    # difference only, well under 0.1 % here
    assert one.compute_time == pytest.approx(two.compute_time, rel=1e-3)
    # the step: etp 2's less its etp time, with the EP all-to-all inside a DGX and the expert
    # gradients' reduction over the 2 expert DP ranks (exposed as composed) instead
    ep_inside = 4 * L * m * collective(g, "all_to_all", S // 2 * K * H * 2, ranks=list(range(8))).time
    expected = (two.step_time - etp_time - two.breakdown["ep"] + ep_inside
                + (one.compute_time - two.compute_time) + one.breakdown["dp_experts"]
                + (one.breakdown["dp"] - two.breakdown["dp"]))
    assert one.step_time == pytest.approx(expected, rel=1e-9)
    assert one.step_time < two.step_time - 0.9 * etp_time


def test_expert_gemms_are_whole_on_a_quarter_of_the_tokens_at_etp_1():
    gpu = tp.get_gpu("h100_sxm")
    m = get_model("mixtral-8x7b")
    kw = dict(micro_batch=1, tp=2, cp=1, ep=8, sequence_parallel=True, gpu=gpu, precision="bf16")
    one = layer_kernel_costs(m, etp=1, **kw)
    two = layer_kernel_costs(m, **kw)
    # etp 2: the tokens gathered over TP, T top_k ep / experts = 8192 rows, FFN split: 2 x 14336 / 2
    # etp 1: 4096 rows (no gather), FFN whole: 2 x 14336 (gated FC1), 1 local expert (8 / ep 8)
    assert two["gemm_fwd"]["fc1"] == pytest.approx(gemm_seconds_shape(8192, 14336, H, gpu, "bf16"), rel=1e-12)
    assert one["gemm_fwd"]["fc1"] == pytest.approx(gemm_seconds_shape(4096, 2 * F, H, gpu, "bf16"), rel=1e-12)
    assert one["gemm_fwd"]["fc2"] == pytest.approx(gemm_seconds_shape(4096, H, F, gpu, "bf16"), rel=1e-12)
    # the attention GEMMs do not change
    assert one["gemm_fwd"]["qkv"] == two["gemm_fwd"]["qkv"]


def test_expert_weights_and_gradients_double_per_gpu_at_etp_1():
    kw = dict(tp=2, pp=1, dp=8, ep=8, zero=1, micro_batch=1, microbatches=4)
    two = memory_breakdown("mixtral-8x7b", **kw)[0]
    one = memory_breakdown("mixtral-8x7b", etp=1, **kw)[0]
    expert_params = L * E * 3 * H * F                 # gated MLP: 3 h ffn a expert
    per_gpu_two = expert_params / (2 * 8)            # over etp x ep GPUs
    per_gpu_one = expert_params / (1 * 8)
    assert per_gpu_one == 2 * per_gpu_two
    # bf16 weights, bf16 gradients (2 bytes each): their difference is the extra expert shard
    assert one["weights"] - two["weights"] == pytest.approx(2 * (per_gpu_one - per_gpu_two), rel=1e-12)
    assert one["gradients"] - two["gradients"] == pytest.approx(2 * (per_gpu_one - per_gpu_two), rel=1e-12)
    # the optimizer (12 bytes a parameter, distributed over the expert DP ranks): 16 / (etp ep)
    # ranks at etp 1 (2) and 1 at etp 2 hold the same 1 / 16 of the experts
    assert one["optimizer"] == pytest.approx(two["optimizer"], rel=1e-12)
    # the FC1 input is not gathered: top_k x h a token, half of it per GPU at etp 1, 32 layers, bf16
    gathered = S * K * H * 2 * L
    assert two["activations"] - one["activations"] == pytest.approx(gathered / 2, rel=1e-12)


def test_etp_refusals():
    with pytest.raises(ValueError, match=r"etp must be None \(= tp\), 1 or tp \(4\), got 2"):
        Parallelism(tp=4, etp=2)
    with pytest.raises(ValueError, match="etp must be an integer"):
        Parallelism(tp=2, etp=0)
    g = tp.rail_optimized(2)
    with pytest.raises(ValueError, match="etp .1. sets the expert layers' TP degree: it needs a mixture-of-experts"):
        training_step(g, "llama-3-8b", Parallelism(tp=2, etp=1), Schedule(global_batch=16))
    # one DGX, tp 2: ep 8 divides tp x dp x cp (8) at etp 1, not dp x cp (4) at etp 2
    one = tp.rail_optimized(1)
    with pytest.raises(ValueError, match=r"ep \(8\) needs a mixture-of-experts model and must divide dp x cp \(4 x 1"):
        training_step(one, "mixtral-8x7b", Parallelism(tp=2, ep=8), Schedule(global_batch=16))
    r = training_step(one, "mixtral-8x7b", Parallelism(tp=2, ep=8, etp=1), Schedule(global_batch=16))
    assert r.profile.layout.groups("ep") == [list(range(8))]
    with pytest.raises(ValueError, match="must divide tp x dp x cp at etp 1"):
        ParallelLayout(tp=2, pp=1, dp=3, ep=4, etp=1)


def test_etp_equal_to_tp_is_the_default():
    g = tp.rail_optimized(2)
    a = training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8), Schedule(global_batch=32))
    b = training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8, etp=2), Schedule(global_batch=32))
    assert a.step_time == b.step_time and a.memory_per_gpu == b.memory_per_gpu


def test_a_trace_at_etp_1_has_no_dispatcher_tp_nodes_and_all_to_alls_in_one_server():
    g = tp.rail_optimized(2)
    step = training_step(g, "mixtral-8x7b", Parallelism(tp=2, ep=8, etp=1),
                         Schedule(global_batch=16, dp_overlap=0.0, tp_overlap=0.0))
    w = workload_from_step(step)
    nodes = [n for n in w.ranks[0].nodes if n.kind == "collective"]
    assert not [n for n in nodes if ".etp." in n.name]
    a2a = [n for n in nodes if n.op == "all_to_all"]
    assert len(a2a) == 4 * L * step.microbatches
    assert {w.groups[n.group] for n in a2a} == {tuple(range(8))}
    assert replay(g, w).iteration_time == pytest.approx(step.step_time, rel=0.03)


def test_the_train_command_takes_etp(capsys):
    import json
    from flowsolver.cli import main

    argv = ["train", "--nodes", "2", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "8", "--global-batch", "32",
            "--json"]
    assert main(argv + ["--etp", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["etp"] == 1 and "etp" not in {p["phase"] for p in out["phases"]}
    api = training_step(tp.rail_optimized(2), "mixtral-8x7b", Parallelism(tp=2, ep=8, etp=1), Schedule(global_batch=32))
    assert out["summary"]["step_time_s"] == pytest.approx(api.step_time, rel=1e-12)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["etp"] == 2
    assert main(argv + ["--etp", "4"]) != 0
    assert "etp must be None (= tp), 1 or tp (2), got 4" in capsys.readouterr().err


@pytest.mark.parametrize("etp", [None, 1])
def test_tp_overlap_leaves_the_expert_gemms_whole(etp):
    """adv24 F1: the experts' grouped GEMMs run with explicit_expert_comm (no Transformer Engine
    communication, no userbuffers overlap; Megatron-Core's TEGroupedMLP), so TP overlap chunks
    only the attention's QKV and proj: the expert GEMMs cost the same with it as without, each one
    whole GEMM per local expert (hand count: tp 8, ep 1, all 8 experts local; 4096 tokens x top-2
    / 8 experts = 1024 rows an expert gathered over TP, gated FC1 2 x 14336 / 8 wide; at etp 1 the
    sequence-parallel share alone, 1024 / 8 = 128 rows, FC1 2 x 14336 wide)."""
    gpu = tp.get_gpu("h100_sxm")
    m = get_model("mixtral-8x7b")
    kw = dict(micro_batch=1, tp=8, cp=1, ep=1, sequence_parallel=True, gpu=gpu, precision="bf16", etp=etp)
    plain = layer_kernel_costs(m, tp_overlap=0.0, **kw)
    overlapped = layer_kernel_costs(m, tp_overlap=0.875, **kw)
    for part in ("gemm_fwd", "gemm_bwd"):
        for g in ("fc1", "fc2"):
            assert overlapped[part][g] == plain[part][g]
    rows, width = (1024, 2 * F // 8) if etp is None else (128, 2 * F)
    assert plain["gemm_fwd"]["fc1"] == pytest.approx(gemm_seconds_shape(rows, width, H, gpu, "bf16", count=E),
                                                     rel=1e-12)
    # the attention's GEMMs do run chunked (Hopper bf16's userbuffers plan: proj's forward in 4 pieces)
    assert overlapped["gemm_fwd"]["proj"] > plain["gemm_fwd"]["proj"]


def test_fp8_weight_casts_count_the_gpus_own_experts():
    """torchao casts every weight a GPU holds once a microbatch: its attention share and its
    experts / ep local experts (split over the expert-TP group), not the top_k a token visits
    (adv24 F1). Hand count of the difference between ep 1 and ep 8 at etp 1: 8 - 1 experts of
    3 h FFN weights."""
    from flowsolver.training._kernels import memory_seconds
    gpu = tp.get_gpu("h100_sxm")
    m = get_model("mixtral-8x7b")
    kw = dict(micro_batch=1, tp=1, cp=1, sequence_parallel=False, gpu=gpu, precision="fp8", fp8_recipe="tensorwise",
              etp=1)
    one = layer_kernel_costs(m, ep=1, **kw)["weight_casts"]
    eight = layer_kernel_costs(m, ep=8, **kw)["weight_casts"]
    from flowsolver.training._kernel_costs import _CAST
    per_param = _CAST["tensorwise"][1]
    assert one - eight == pytest.approx(memory_seconds(per_param * 7 * 3 * H * F, gpu), rel=1e-9)


def test_a_capacity_factor_below_one_token_an_expert_is_refused_by_name():
    """Megatron-Core gives each expert at least ceil(tokens x top_k / experts x factor) >= 1 token
    of a rank's router input; with sequence parallelism over tp 8 a rank routes 4096 / 8 of a
    microbatch's tokens, 512 x 2 routed copies: a factor below 8 / 1024 for Mixtral's 8 experts is
    refused naming capacity_factor (adv24 F5: the error named a collective's size), that least
    factor runs."""
    g = tp.rail_optimized(4)
    least = E / (S / 8 * K)
    with pytest.raises(ValueError, match=r"capacity_factor \(1e-09\) must leave every expert at least one token"):
        training_step(g, "mixtral-8x7b", Parallelism(tp=8, ep=4, capacity_factor=1e-9))
    with pytest.raises(ValueError, match=r"capacity_factor \(0.0078\d*\) must leave"):
        training_step(g, "mixtral-8x7b", Parallelism(tp=8, ep=4, capacity_factor=least * 0.999))
    assert training_step(g, "mixtral-8x7b", Parallelism(tp=8, ep=4, capacity_factor=least)).step_time > 0
