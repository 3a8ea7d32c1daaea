"""Command-line messages name the option at fault, in the command line's words."""

import pytest

import topologies as tp
from flowsolver.cli import main


@pytest.mark.parametrize("argv, said", [
    # NumPy's "expected non-negative integer" (the failures' generator) named nothing
    (["--fail-fraction", "0.1", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    # fail_links' parameter, not the option
    (["--fail-fraction", "2"], "--fail-fraction must be in [0, 1], got 2.0"),
    (["--fail-fraction", "-0.5"], "--fail-fraction must be in [0, 1], got -0.5"),
    # the policy_options key the command line builds from --subflows
    (["--policy", "ecmp_hash", "--subflows", "-1"], "--subflows must be an integer >= 1, got -1"),
])
def test_a_bad_option_is_named_as_the_command_line_spells_it(capsys, argv, said):
    assert main(["collective", "--nodes", "2", "-b", "1M", "-e", "1M", *argv]) == 2
    assert capsys.readouterr().err.strip() == f"flowsolver: error: {said}"


def test_a_cluster_files_failures_name_the_options_too(capsys, tmp_path):
    path = tmp_path / "g.json"
    tp.save(tp.rail_optimized(nodes=2), path)
    assert main(["collective", "--cluster", str(path), "-b", "1M", "-e", "1M", "--fail-fraction", "1.5"]) == 2
    assert capsys.readouterr().err.strip() == "flowsolver: error: --fail-fraction must be in [0, 1], got 1.5"


@pytest.mark.parametrize("factor", ["1.5", "2.5", "1", "0", "x"])
def test_step_factor_is_an_integer_as_in_nccl_tests(capsys, factor):
    # nccl-tests reads -f with strtol (src/common.cu): -f 1.5 modelled sizes 1.5 and 2.25 B and
    # printed them as 1 and 2
    assert main(["collective", "--nodes", "1", "-b", "1", "-e", "10", "-f", factor]) == 2
    err = capsys.readouterr().err
    assert f"argument -f/--step-factor: must be an integer >= 2 (nccl-tests' -f is a whole factor), got " \
           f"'{factor}'" in err


def test_an_integer_step_factor_gives_nccl_tests_sizes(capsys):
    import json

    # nccl-tests' loop: size = minBytes, size *= stepFactor while size <= maxBytes: 1, 3, 9 bytes
    assert main(["collective", "--nodes", "1", "-b", "1", "-e", "9", "-f", "3", "--json"]) == 0
    assert [r["size"] for r in json.loads(capsys.readouterr().out)] == [1, 3, 9]
