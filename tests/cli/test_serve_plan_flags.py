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
