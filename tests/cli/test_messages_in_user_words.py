"""Errors name what the user typed, in the unit the flag takes (adv20a F6): a model file's
seq_len was reported as --seq-len, --lifetime-days 0 in seconds, goodput --compute nan as
workload['compute'], goodput --jobs as "the --cluster" the user never gave, serve
--ttft-target 0 in seconds though the flag takes ms, --straggler's FACTOR as Component
'straggler'."""

import json

import pytest

from ..helpers import cli_error


_error = cli_error


def test_model_file_seq_len_is_the_files_field(tmp_path, capsys):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(dict(layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256,
                                    seq_len=1e9)))
    message = _error(capsys, ["train", "--nodes", "1", "--model", str(path), "--tp", "8"])
    assert message == f"--model {str(path)!r}: the file's seq_len must be an integer >= 1, got 1000000000.0"
    assert "--seq-len" not in message


def test_lifetime_days_in_days(capsys):
    message = _error(capsys, ["design", "--gpus", "64", "--model", "llama-3-8b", "--lifetime-days", "0"])
    assert message == "--lifetime-days must be a finite number of days > 0, got 0"


def test_goodput_compute_names_the_flag(capsys):
    message = _error(capsys, ["goodput", "--nodes", "8", "--checkpoint-cost", "30", "--restart", "600",
                              "--compute", "nan"])
    assert message == "--compute must be a finite number of seconds >= 0, got nan"


def test_goodput_jobs_beyond_the_cluster_names_jobs_not_cluster_flag(capsys):
    message = _error(capsys, ["goodput", "--jobs", "16", "16", "48", "--nodes", "8"])
    # 8 DGX H100 servers of 8 GPUs: 64
    assert message.startswith("--jobs 16 16 48 ask for 80 GPUs; the cluster (") and message.endswith(") has 64")
    assert "--cluster" not in message


def test_goodput_straggler_factor_names_the_flag(capsys):
    message = _error(capsys, ["goodput", "--nodes", "8", "--checkpoint-cost", "30", "--restart", "600",
                              "--straggler", "1,2,1.5"])
    assert message == "--straggler '1,2,1.5': FACTOR must be in (0, 1] (the fraction of the rate kept), got 1.5"


@pytest.mark.parametrize("flag, value", [("--ttft-target", "0"), ("--tpot-target", "-5")])
def test_serve_targets_in_ms(capsys, flag, value):
    message = _error(capsys, ["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "8", "--rate", "1",
                              "--duration", "2", flag, value])
    assert message == f"{flag} must be a finite number of ms > 0, got {float(value):g}"


def test_serve_context_refusal_names_both_flags(capsys):
    # adv20a / fix20d: '--prompt ... + output (up to 1000)' left output unmapped and offered a
    # Python ModelSpec; 8000 + 1000 > llama-3-8b's 8192 (its max_position_embeddings)
    message = _error(capsys, ["serve", "--model", "llama-3-8b", "--nodes", "1", "--tp", "1", "--prompt", "8000",
                              "--output", "1000", "--rate", "1"])
    assert message.startswith("--prompt (up to 8000 tokens) + --output (up to 1000) = 9000 tokens is beyond "
                              "llama-3-8b's context of 8192 tokens")
    assert message.endswith("shorten --prompt or --output") and "ModelSpec with" not in message
