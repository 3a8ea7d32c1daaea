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

    # nccl-tests' loop: size = minBytes, size *= stepFactor while size <= maxBytes: 1, 3, 9 bytes (int8: a byte an element)
    assert main(["collective", "--nodes", "1", "-b", "1", "-e", "9", "-f", "3", "--dtype", "int8", "--json"]) == 0
    assert [r["size"] for r in json.loads(capsys.readouterr().out)] == [1, 3, 9]


def test_token_counts_are_decimal_byte_sizes_binary():
    from flowsolver.cli import parse_size
    from flowsolver.cli._arguments import parse_count

    # the Llama 3 paper trains on "15T tokens", 15e12; nccl-tests' -e 1G is 2^30 bytes
    assert parse_count("15T", "--budget") == 15e12
    assert [parse_count(f"1{p}", "--tokens") for p in "KMGT"] == [1e3, 1e6, 1e9, 1e12]
    assert parse_size("1T") == 2**40


@pytest.mark.parametrize("text", ["1TB", "1TiB", "-5M", "0", "x", "inf"])
def test_a_bad_token_count_is_refused_naming_the_option(capsys, text):
    argv = ["goodput", "--nodes", "1", "--checkpoint-cost", "30", "--restart", "300", "--trajectories", "2",
            f"--budget={text}"]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("flowsolver: error: --budget must be a positive number of tokens")


def test_goodput_reads_its_budget_and_step_tokens_in_decimal(capsys):
    import json

    base = ["goodput", "--nodes", "1", "--checkpoint-cost", "30", "--restart", "300", "--compute", "5",
            "--trajectories", "20", "--days", "60", "--json"]
    out = {}
    for tokens, budget in (("16M", "1T"), ("16000000", "1e12"), ("16M", str(2**40))):
        assert main([*base, "--tokens", tokens, "--budget", budget]) == 0
        out[tokens, budget] = json.loads(capsys.readouterr().out)
    decimal, plain, binary = out.values()
    # tokens/day of a healthy run: 16e6 tokens a step, 86,400 s a day over the step time
    assert decimal["healthy_tokens_per_day"] == pytest.approx(16e6 * 86400 / decimal["healthy_step_time"])
    assert decimal["days_to_train_p50"] == plain["days_to_train_p50"]
    # 2^40 tokens (1T read as binary, as before) take 10 % longer, the same trajectories
    assert binary["days_to_train_p50"] > decimal["days_to_train_p50"] * 1.05


def test_a_sweep_file_takes_sizes_as_every_command_does(tmp_path, capsys):
    """newuser25 #7: size = ["64M"] in a sweep file made every row an error ("size must be a finite
    number of bytes > 0, got '64M'") while `-b 64M` and --size 1G are read everywhere else."""
    import csv

    config = tmp_path / "s.toml"
    config.write_text('[grid]\nfamily = ["fat_tree"]\nk = [4]\nop = ["all_reduce"]\nsize = ["64M", 1048576]\n')
    out = tmp_path / "out.csv"
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert sorted(float(r["size"]) for r in rows) == [2.0**20, 64 * 2.0**20] and {r["status"] for r in rows} == {"ok"}
    config.write_text('[grid]\nfamily = ["fat_tree"]\nk = [4]\nop = ["all_reduce"]\nsize = ["64 GB"]\n')
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 2
    assert "config: size: size '64 GB' is ambiguous" in capsys.readouterr().err
