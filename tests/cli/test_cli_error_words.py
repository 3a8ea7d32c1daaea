"""The CLI's errors name the command's own options (docs/guide/cli.md), not the Python keywords
behind them (adv17c finding 3): replay offered "(or ranks=)" (replay has no --ranks), goodput
"give checkpoint_interval" (the option is --interval), upgrade "USD with --cost 'bill'"
(upgrade's --cost takes uniform or bandwidth)."""

import re

import pytest

from flowsolver.cli import main

from ..helpers import cli_error

_TRACE = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 16\n1\n"
          "layer1 -1 1000000 ALLREDUCE 1048576 1000000 ALLREDUCE 1048576 1000000 ALLREDUCE 67108864 100\n")


_error = cli_error


def _options(capsys, command):
    """The long options ``flowsolver COMMAND --help`` lists."""
    assert main([command, "--help"]) == 0
    return set(re.findall(r"--[a-z][\w-]*", capsys.readouterr().out))


def _only_own_words(capsys, command, message):
    named = set(re.findall(r"--[a-z][\w-]*", message))
    assert named <= _options(capsys, command), named - _options(capsys, command)
    assert not re.search(r"\b[a-z_]+=", message), message          # no Python keyword (ranks=, cost=)


def test_replay_does_not_offer_a_ranks_option_it_lacks(tmp_path, capsys):
    trace = tmp_path / "w.txt"
    trace.write_text(_TRACE)                                   # 16 ranks, one DGX H100 has 8 GPUs
    message = _error(capsys, ["replay", str(trace), "--nodes", "1"])
    assert message == "the trace has 16 ranks but the graph 8 GPUs: pass a bigger cluster"
    _only_own_words(capsys, "replay", message)


@pytest.mark.parametrize("flags, said", [
    (["--checkpoint-cost", "0", "--restart", "0"],
     "with --checkpoint-cost 0 there is no optimal interval (checkpoint as often as you like): give --interval"),
    (["--checkpoint-cost", "1", "--restart", "-1"], "--restart must be a finite number of seconds >= 0, got -1.0"),
    (["--checkpoint-cost", "1", "--restart", "1", "--interval", "-3"],
     "--interval must be a finite number of seconds > 0, got -3.0"),
    # --repair is in hours (the library's repair_time in seconds: -3 h was "got -10800.0")
    (["--checkpoint-cost", "1", "--restart", "1", "--no-spares", "--repair", "-3"],
     "--repair must be a finite number of hours >= 0, got -3.0"),
])
def test_goodput_names_its_own_options(capsys, flags, said):
    message = _error(capsys, ["goodput", "--nodes", "8", "--trajectories", "5", *flags])
    assert message == said
    _only_own_words(capsys, "goodput", message)


@pytest.mark.parametrize("budget", ["-1", "nan", "inf"])
def test_upgrade_s_budget_error_names_its_own_costs(capsys, budget):
    message = _error(capsys, ["upgrade", "--nodes", "1", "--budget", budget])
    assert message.startswith("--budget must be a finite number >= 0")
    assert "'uniform'" in message and "'bandwidth'" in message and "'bill'" in message   # what --cost takes
    _only_own_words(capsys, "upgrade", message)
