"""SimAI workload files (written here in SimAI's format) read and replayed; the
``flowsolver replay`` command on them and on a Chakra trace."""

import json

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.cli import main
from flowsolver.traces import TraceError, read_simai_workload, replay

HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {tp} ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: {n} " \
         "checkpoints: 0 checkpoint_initiates: 0"


def _file(tmp_path, rows, *, tp_=8, n=8):
    path = tmp_path / "workload.txt"
    path.write_text("\n".join([HEADER.format(tp=tp_, n=n), str(len(rows))] + rows) + "\n")
    return path


def test_a_tp_layer_computes_then_all_reduces_in_its_tp_group(tmp_path):
    # SimAI's microAllReduce example: 556 us of forward compute, then a 512 MiB all-reduce
    path = _file(tmp_path, ["embedding_layer     -1 556000  ALLREDUCE   536870912      1       NONE 0        1      "
                            "NONE   0      1"])
    g = tp.rail_optimized(1)
    res = replay(g, read_simai_workload(path))
    ar = collective(g, "all_reduce", 536870912).time
    assert res.iteration_time == pytest.approx(556e-6 + ar + 2e-9, rel=1e-9)


def test_weight_gradients_reduce_in_the_dp_group_beside_the_backward(tmp_path):
    size = 2**28
    # two layers; layer 1's gradients (reduced first) hide behind layer 0's backward compute
    rows = [f"l0 -1 1000000 NONE 0 2000000 NONE 0 3000000 ALLREDUCE {size} 1",
            f"l1 -1 1000000 NONE 0 2000000 NONE 0 3000000 ALLREDUCE {size} 1"]
    g = tp.rail_optimized(2)
    w = read_simai_workload(_file(tmp_path, rows, n=16))
    assert {c.ranks for c in w.comms} == {(t, 8 + t) for t in range(8)}       # DP groups: one rail each
    res = replay(g, w)
    dp = collective(g, "all_reduce", size, ranks=[0, 8]).time
    # forward 2 ms; backward l1 5 ms; l1's reduction runs during l0's 5 ms, l0's after it (in order)
    expected = 2e-3 + 5e-3 + max(5e-3, dp) + dp
    assert res.iteration_time == pytest.approx(expected, rel=1e-9)


def test_gradient_accumulation_reduces_once_after_the_last_microbatch(tmp_path):
    size = 2**26
    path = tmp_path / "w.txt"
    path.write_text(HEADER.format(tp=8, n=16).replace("ga: 1", "ga: 2") +
                    f"\n1\nlayer -1 1000000 NONE 0 1000000 NONE 0 1000000 ALLREDUCE {size} 1\n")
    g = tp.rail_optimized(2)
    w = read_simai_workload(path)
    assert len(w.comms) == 8                                  # one per DP group, not per microbatch
    res = replay(g, w)
    dp = collective(g, "all_reduce", size, ranks=[0, 8]).time
    assert res.iteration_time == pytest.approx(2 * 3e-3 + dp, rel=1e-9)


def test_pipeline_stages_pass_pp_comm_bytes_forward_and_back(tmp_path):
    size = 2**26
    path = tmp_path / "w.txt"
    path.write_text(f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 2 vpp: 1 ga: 1 "
                    f"all_gpus: 2 checkpoints: 0 checkpoint_initiates: 0 pp_comm {size}\n1\n"
                    "layer -1 1000000 NONE 0 1000000 NONE 0 1000000 NONE 0 100\n")
    g = tp.rail_optimized(1)
    res = replay(g, read_simai_workload(path))
    p2p = collective(g, "send_recv", size, ranks=[0, 1]).time
    # stage 0 forward, activations over, stage 1 forward and backward, gradients back, stage 0 backward
    assert res.iteration_time == pytest.approx(1e-3 + p2p + 3e-3 + p2p + 2e-3, rel=1e-9)
    assert [p.rank for p in res.critical_path if p.kind == "compute" and p.end > p.start] == [0, 1, 1, 1, 0, 0]


def test_expert_scopes_run_in_the_ep_and_the_expert_dp_groups(tmp_path):
    # ep 2 over dp 4 (tp 1): EP groups of consecutive DP ranks, the expert gradients reduced
    # among the DP ranks holding the same experts (SimAI's _EP and _DP_EP scopes)
    a2a, grads = 2**20, 2**22
    path = tmp_path / "w.txt"
    path.write_text(HEADER.format(tp=1, n=4).replace("ep: 1", "ep: 2") + "\n1\n"
                    f"moe -1 1000000 ALLTOALL_EP {a2a} 1000000 NONE 0 1000000 ALLREDUCE_DP_EP {grads} 1\n")
    w = read_simai_workload(path)
    assert sorted((c.op, c.ranks) for c in w.comms) == [("all_reduce", (0, 2)), ("all_reduce", (1, 3)),
                                                       ("all_to_all", (0, 1)), ("all_to_all", (2, 3))]
    g = tp.rail_optimized(1)
    res = replay(g, w)
    # forward 1 ms, its all-to-all, input and weight gradients 2 ms, then the expert reduction
    expected = 3e-3 + collective(g, "all_to_all", a2a, ranks=[0, 1]).time + \
        collective(g, "all_reduce", grads, ranks=[0, 2]).time
    assert res.iteration_time == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("text, match", [
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 8\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "all_gpus"),
    (HEADER.format(tp=8, n=8) + "\n2\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", r"line 4: missing"),
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1 BROADCASTX 64 1 NONE 0 1 NONE 0 1", r"line 3: comm type 'BROADCASTX'"),
    (HEADER.format(tp=3, n=8) + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", r"tp \(3\) x pp \(1\) must divide"),
    # the header's first word is the policy: without it the TP key was paired off and TP read as 1
    (HEADER.format(tp=8, n=8).split(" ", 1)[1] + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "parallelism policy"),
    # a key spelled another way is not read past (TP again 1, its collectives gone)
    (HEADER.format(tp=8, n=8).replace("NPU", "npu") + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1",
     "'model_parallel_npu_group:' is not a key of SimAI's header: 'model_parallel_NPU_group:'"),
    (HEADER.format(tp=8, n=8).replace("all_gpus:", "all_gpu:") + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1",
     "'all_gpus:'"),
    (HEADER.format(tp=8, n=8) + " ga: 4\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "ga is given twice"),
    ("HYBRID_TRANSFORMER ep: 1 all_gpus: 8\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "model_parallel_NPU_group: N"),
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1 7", "12 columns"),
    (HEADER.format(tp=8, n=8).replace("checkpoints: 0 checkpoint_initiates: 0", "checkpoints: 3 0 1")
     + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "checkpoints announces 3 layer ids, the line holds 2"),
    (HEADER.format(tp=8, n=8).replace("ga: 1", "ga: \u00b2") + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1",
     "ga must be an integer"),
    # float() and int() take digit separators and other scripts' digits: SimAI's C++ stream read stops at
    # the "_" (adv18a F4: 1_048_576 and Arabic-Indic digits were both read as 1 MiB)
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1000 ALLREDUCE 1_048_576 1000 NONE 0 1000 ALLREDUCE 2097152 100",
     r"line 3: fwd_comm_size \(column 5\) must be a number of bytes >= 0, got '1_048_576'"),
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1000 ALLREDUCE \u0661\u0660\u0664\u0668\u0665\u0667\u0666 1000 NONE 0 "
     "1000 NONE 0 1", r"line 3: fwd_comm_size \(column 5\)"),
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1_000 NONE 0 1 NONE 0 1 NONE 0 1", r"line 3: fwd_compute \(column 3\)"),
    (HEADER.format(tp=8, n=8) + "\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1e\u0663", r"line 3: wg_update \(column 12\)"),
    (HEADER.format(tp=8, n=8) + "\n\u0661\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "line 2: the layer count must be an "
     "integer"),
    (HEADER.format(tp=8, n=8) + "\n0_1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1", "line 2: the layer count must be an "
     "integer"),
])
def test_bad_simai_files_name_the_line(tmp_path, text, match):
    path = tmp_path / "w.txt"
    path.write_text(text)
    with pytest.raises(TraceError, match=match):
        read_simai_workload(path)


@pytest.mark.parametrize("header, tp_", [
    # SimAI's Workload.cc reads "checkpoints: N" and "checkpoint_initiates: N" each followed by N layer ids
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 "
     "checkpoints: 2 0 1 checkpoint_initiates: 2 0 1", 4),
    # AICB's multi_all_reduce generator writes expert_parallel_npu_group:, and pp_comm as a float
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 expert_parallel_npu_group: 1 ep: 1 pp: 1 "
     "vpp: 1 ga: 1 all_gpus: 8 pp_comm: 2097152.0", 2),
    ("DATA all_gpus: 8", 1),                   # a data-parallel policy: no TP group to give
])
def test_simai_headers_as_simai_and_aicb_write_them(tmp_path, header, tp_):
    path = tmp_path / "w.txt"
    path.write_text(header + "\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n")     # a weight-gradient all-reduce
    w = read_simai_workload(path)
    assert w.n_ranks == 8 and {len(c.ranks) for c in w.comms} == {8 // tp_}          # in the DP groups


def test_the_replay_command_on_a_simai_file_and_on_a_chakra_trace(tmp_path, capsys):
    path = _file(tmp_path, ["layer -1 556000 ALLREDUCE 536870912 1 NONE 0 1 NONE 0 1"])
    assert main(["replay", str(path), "--nodes", "1", "--top", "-1"]) == 2       # was "all but one"
    assert "expected a whole number >= 0" in capsys.readouterr().err
    assert main(["replay", str(path), "--nodes", "1", "--json", "--chrome", str(tmp_path / "t.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    ar = collective(tp.rail_optimized(1), "all_reduce", 536870912).time
    assert out["summary"]["iteration_time_s"] == pytest.approx(556e-6 + ar + 2e-9, rel=1e-9)
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    pytest.importorskip("google.protobuf")
    from flowsolver.traces import write_chakra

    write_chakra(read_simai_workload(path), tmp_path / "et")
    assert main(["replay", str(tmp_path / "et"), "--nodes", "1", "--json"]) == 0
    # the same workload through Chakra files: durations in whole microseconds (the 1 ns rounds away)
    again = json.loads(capsys.readouterr().out)["summary"]["iteration_time_s"]
    assert again == pytest.approx(556e-6 + ar, abs=1e-6)
    assert main(["replay", str(tmp_path / "et"), "--nodes", "1"]) == 0
    assert f"iteration {again * 1e3:.3f} ms" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "missing"), "--nodes", "1"]) == 2
    assert "no Chakra trace files" in capsys.readouterr().err
