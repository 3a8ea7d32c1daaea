"""``flowsolver serve`` / ``plan``: the decode degrees refused like --tp 0, and error messages
naming the flag the user gave (not another flag of the same command)."""

import pytest

from flowsolver.cli import main

SERVE = ["serve", "--nodes", "2", "--model", "llama-3-8b", "--tp", "2", "--rate", "5", "--duration", "2",
         "--prompt", "512", "--output", "16"]


@pytest.mark.parametrize("flag", ["--decode-tp", "--decode-pp", "--decode-ep"])
def test_zero_decode_degree_is_refused_like_tp_zero(flag, capsys):
    # was replaced by --tp / --pp / --ep (x or args.x) and ran
    assert main(SERVE + ["--prefill-gpus", "8", flag, "0"]) == 2
    assert capsys.readouterr().err.strip() == f"flowsolver: error: {flag} must be an integer >= 1, got 0"
    assert main(SERVE[:6] + ["0"] + SERVE[7:]) == 2                 # --tp 0, the same words
    assert capsys.readouterr().err.strip() == "flowsolver: error: --tp must be an integer >= 1, got 0"


def test_serve_request_seed_is_named(capsys):
    # said "--seed must be ...": --seed is the cable-failure seed of the topology
    assert main(SERVE + ["--request-seed", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "flowsolver: error: --request-seed must be an integer >= 0, got -1"


def test_plan_job_gpus_is_named(capsys):
    # 12 GPUs are not whole servers of 8; said "--gpus (12) ...": --gpus sizes the cluster
    assert main(["plan", "--nodes", "2", "--model", "llama-3-8b", "--global-batch", "32", "--top", "1",
                 "--job-gpus", "12"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowsolver: error: --job-gpus (12) must be whole servers") and "--gpus" not in err


def test_serve_memory_flags_reach_the_kv_cache(capsys):
    # adv23 F7: the CLI could not give TensorRT-LLM's accounting. A static batch of 32 requests of
    # 2,048 + 2,048 tokens on one H100 with Llama 3 8B: 131,072 tokens at 128 KiB of KV each, 17.2
    # GB. At vLLM's 0.9 of the H100's memory, less 16 GB of weights, a 65,536-token step's
    # activation (~7 GB) and 1.8 GiB of runtime, ~47 GB are left: one wave. At 0.4, ~7 GB: two
    batch = ["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "1", "--batch", "32", "--prompt", "2048",
             "--output", "2048", "--token-budget", "65536", "--max-batch", "64"]
    assert main(batch) == 0
    assert "wave" not in capsys.readouterr().out
    assert main(batch + ["--memory-utilization", "0.4"]) == 0
    assert "2 waves" in capsys.readouterr().out
    assert main(batch + ["--memory-accounting", "trtllm", "--memory-utilization", "1.0"]) == 2
    assert "must be below 1" in capsys.readouterr().err


def test_a_static_batchs_waves_are_said_with_their_cause_and_the_flag(capsys):
    # newuser23: 64 requests of 1,024 prompt tokens under the default --token-budget 8192 ran in 8
    # waves, and the note listed every possible cause: 65,536 prompt tokens need --token-budget 65536
    batch = ["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "8", "--batch", "64", "--prompt", "1024",
             "--output", "16"]
    assert main(batch) == 0
    out = capsys.readouterr().out
    assert "its 65,536 prompt tokens exceed --token-budget 8192 (one wave needs --token-budget 65536)" in out
    assert "--max-batch" not in out.split("note:")[1]
    assert main(batch + ["--token-budget", "65536"]) == 0
    assert "note:" not in capsys.readouterr().out
    assert main(batch + ["--token-budget", "65536", "--max-batch", "16"]) == 0
    assert "its 64 requests exceed --max-batch 16 x ep 1 sequences" in capsys.readouterr().out


def test_static_batch_one_token_output_and_a_full_headroom_in_their_own_words(capsys):
    """adv25 F8: --batch 1e8 was refused as "--rate x --duration", flags never given; --output 1
    printed "TPOT p50 nan ms"; plan --headroom 0.99 listed layouts against "memory <= -0.8 GB"
    (an 85.5 GB H100 less the 0.99: 0.855 GB, below the CUDA context's reserve)."""
    assert main(["serve", "--nodes", "1", "--model", "llama-3-70b", "--tp", "8", "--batch", "100000000",
                 "--prompt", "128", "--output", "16"]) == 2
    assert "--batch must be an integer in 1 ... 10,000,000, got 100000000" in capsys.readouterr().err
    assert main(["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "8", "--rate", "2", "--duration", "5",
                 "--prompt", "128", "--output", "1"]) == 0
    out = capsys.readouterr().out
    assert "TPOT -- (one output token" in out and "nan" not in out
    assert main(["plan", "--nodes", "2", "--model", "llama-3-8b", "--global-batch", "64", "--headroom", "0.99"]) == 2
    assert "--headroom 0.99 leaves 0.855 GB" in capsys.readouterr().err


def test_upgrade_names_factor_with_a_bandwidth_cost_and_prints_no_negative_time(capsys):
    """newuser25 #3: --factor 0.5 with --cost bandwidth was refused as "--cost of 'access' must be
    > 0, got -1600.0" (the GB/s added is negative below x1); --factor 1e5 printed first-order
    times of -8,922,338.9 us. A time below zero is no estimate: "n/a"."""
    assert main(["upgrade", "--nodes", "4", "--size", "256M", "--factor", "0.5", "--cost", "bandwidth"]) == 2
    assert "--factor must be > 1 with --cost bandwidth" in capsys.readouterr().err
    assert main(["upgrade", "--nodes", "4", "--size", "256M", "--factor", "1e5"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("alone")]
    assert rows and all(r[3] == "n/a" or float(r[3]) >= 0 for r in rows) and any(r[3] == "n/a" for r in rows)


def test_a_decode_layout_that_does_not_divide_its_pool_names_the_decode_flags(capsys):
    """newuser25 #4: --decode-tp 16 on a decode pool of 8 GPUs read "decode: --tp * --pp * --ep = 16
    must divide its 8 GPUs", naming flags the user had not set wrong."""
    assert main(["serve", "--nodes", "2", "--prefill-gpus", "8", "--decode-tp", "16", "--batch", "8"]) == 2
    err = capsys.readouterr().err
    assert "--decode-tp x --decode-pp x --decode-ep" in err and "= 16 must divide the decode pool's 8 GPUs" in err


def test_a_latency_target_beside_a_static_batch_is_refused(capsys):
    """newuser25: serve --batch 8 --ttft-target 500 ignored the target without a word."""
    assert main(["serve", "--nodes", "1", "--batch", "8", "--output", "1", "--ttft-target", "500"]) == 2
    assert "--ttft-target counts a stream's requests" in capsys.readouterr().err


def test_upgrade_spends_usd_with_the_bill(capsys):
    """newuser25 #3: the README promises a budget in USD for upgrades; the CLI offered only uniform
    and bandwidth costs. --cost bill is the library's default (upgrade_cost: the bill before and
    after): its plan and costs are upgrade_plan's and upgrade_cost's."""
    import json

    import topologies as tp
    from flowsolver.upgrade import Upgrade, upgrade_cost, upgrade_plan
    assert main(["upgrade", "--nodes", "8", "--size", "1G", "--cost", "bill", "--budget", "2e6", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    g = tp.rail_optimized(8)
    ref = upgrade_plan(g, dict(op="all_reduce", size=2.0**30, policy="ecmp"), 2e6)
    plan = [r for r in rows if r["kind"] == "plan"]
    assert [r["upgrade"] for r in plan] == list(ref.upgrade) and [r["cost"] for r in plan] == list(ref.cost)
    access = next(r for r in rows if r["kind"] == "alone" and r["upgrade"] == "access")
    assert access["cost"] == upgrade_cost(g, Upgrade("access", factor=2.0))
