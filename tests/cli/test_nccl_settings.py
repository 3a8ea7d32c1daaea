"""``--algorithm`` / ``--protocol`` take what NCCL_ALGO / NCCL_PROTO take (comma lists, ``^``,
``function:list;...``, any case): a list is NCCL's choice among its names, as the API's lists."""

import json

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.cli import main

from .test_cli import _LOG


def _rows(capsys, argv):
    assert main(["collective", "--nodes", "2", "-b", "1K", "-e", "64M", "-f", "16", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, api", [
    # NCCL_ALGO=Ring,Tree: NCCL's choice between ring and tree, any case
    (["--algorithm", "Ring,TREE"], dict(algorithm=["ring", "tree"])),
    # NCCL_PROTO=^LL128: every protocol but LL128
    (["--protocol", "^ll128"], dict(protocol=["LL", "Simple"])),
    # per function: the all-reduce's entry wins over the first (every function's)
    (["--algorithm", "ring;allreduce:tree,nvlstree", "--protocol", "LL,Simple"],
     dict(algorithm=["tree", "nvls_tree"], protocol=["LL", "Simple"])),
    # an entry for another function leaves the all-reduce NCCL's whole choice
    (["--algorithm", "allgather:ring", "--protocol", "allgather:LL"], {}),
])
def test_a_setting_times_what_the_api_times_for_the_same_list(capsys, argv, api):
    g = tp.rail_optimized(nodes=2)
    rows = _rows(capsys, argv)
    for r in rows:
        want = collective(g, "all_reduce", r["size"], **api)
        assert (r["algorithm"], r["protocol"]) == (want.algorithm, want.protocol)
        assert r["time_us"] == pytest.approx(want.time * 1e6, rel=1e-9)
    assert all(r[a] in api[a] for r in rows for a in api)


def test_a_list_limits_the_choice(capsys):
    # across two DGX H100 NCCL's free pick at 1 KiB is tree / LL; NCCL_ALGO=^Tree leaves it
    # ring, NVLS and NVLSTree (the last two Simple only, tuning.cc), NCCL_PROTO=^LL LL128 and Simple
    free = _rows(capsys, [])[0]
    assert (free["algorithm"], free["protocol"]) == ("tree", "LL")
    limited = _rows(capsys, ["--algorithm", "^Tree", "--protocol", "^LL"])[0]
    assert limited["algorithm"] != "tree" and limited["protocol"] != "LL"


@pytest.mark.parametrize("option, value, said", [
    ("--algorithm", "foo", "'foo' is not one of NCCL's names (tree, ring, "),
    ("--algorithm", "ring;tree", "every entry but the first must name its function"),
    ("--algorithm", "allreduc:ring", "'allreduc' is not one of NCCL's functions"),
    ("--protocol", "LL,LL129", "'LL129' is not one of NCCL's names (ll, ll128, simple, in any case)"),
    ("--protocol", "", "an empty value names nothing"),
])
def test_a_bad_value_is_argparse_s_error_naming_the_option_and_what_it_takes(capsys, option, value, said):
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "1M", option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    variable = "NCCL_ALGO" if option == "--algorithm" else "NCCL_PROTO"
    assert err.startswith(f"flowsolver collective: error: argument {option}: ") and said in err
    assert f"it takes auto or what {variable} takes: names separated by ','" in err


def test_flowsolver_s_own_algorithms_and_auto_still_work(capsys):
    g = tp.rail_optimized(nodes=2)
    for argv, api in ((["--algorithm", "halving_doubling"], dict(algorithm="halving_doubling")),
                      (["--algorithm", "AUTO", "--protocol", "auto"], {}),
                      (["--op", "all_to_all", "--algorithm", "pairwise"], dict(algorithm="pairwise"))):
        op = "all_to_all" if "all_to_all" in argv else "all_reduce"
        r = _rows(capsys, argv)[-1]
        assert r["time_us"] == pytest.approx(collective(g, op, r["size"], **api).time * 1e6, rel=1e-9)


def test_a_list_that_runs_nothing_for_the_op_names_the_option(capsys):
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "1M", "--op", "all_gather", "--algorithm",
                 "Tree"]) == 2
    assert capsys.readouterr().err.strip() == ("flowsolver: error: --algorithm 'Tree' for all_gather: none of tree "
                                               "runs all_gather (it runs ring, halving_doubling, nvls, pat)")
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "1M", "--algorithm", "CollNetDirect"]) == 2
    assert "--algorithm 'CollNetDirect' allowed all_reduce only what flowsolver does not model (CollNet)" in \
        capsys.readouterr().err


def test_compare_takes_the_options_over_the_log_s_settings(capsys, tmp_path):
    pytest.importorskip("pandas")
    log = tmp_path / "rs.log"
    log.write_text("host:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL\n" + _LOG)
    assert main(["collective", "--nodes", "1", "--compare", str(log), "--protocol", "ll128,SIMPLE", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    g = tp.rail_optimized(nodes=1)
    from flowsolver.collectives import nccl_tests_collective
    for r in rows:
        want = nccl_tests_collective(g, "reduce_scatter", r["size"], protocol=["LL128", "Simple"])
        assert r["protocol"] == want.protocol and r["time_us"] == pytest.approx(want.time * 1e6, rel=1e-9)


def test_calibrate_takes_the_settings_as_calibrate_takes_lists(capsys, tmp_path):
    pytest.importorskip("pandas")
    from flowsolver import calibrate

    log = tmp_path / "rs.log"
    log.write_text(_LOG)
    # NCCL_ALGO=^NVLS for a reduce-scatter: ring and PAT (tree and NVLSTree do not run it)
    assert main(["calibrate", str(log), "--nodes", "1", "--algorithm", "^nvls", "--protocol", "LL128,Simple",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cal = calibrate(tp.rail_optimized(nodes=1), [str(log)], algorithm=["ring", "pat"], protocol=["LL128", "Simple"])
    assert got["efficiency"] == pytest.approx(cal.efficiency, rel=1e-12)
    assert [r["model"] for r in got["residuals"]] == pytest.approx(list(cal.residuals["model"]), rel=1e-12)


def test_a_logs_unmodelled_settings_are_said_as_cli_warnings(capsys, tmp_path):
    # NCCL_IB_HCA is a setting the model does not express: compare and calibrate name it as the CLI
    # says its other warnings ("flowsolver: warning: ..."), not as a Python warning with a source line
    import warnings
    pytest.importorskip("pandas")
    log = tmp_path / "rs.log"
    log.write_text("dgx0:100:100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n" + _LOG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no Python warning leaves the CLI
        assert main(["collective", "--nodes", "1", "--compare", str(log), "--json"]) == 0
        assert main(["calibrate", str(log), "--nodes", "1"]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "NCCL_IB_HCA" in line]
    assert len(said) == 2 and all(line.startswith(f"flowsolver: warning: {log}: NCCL_IB_HCA=mlx5_0: ") for line in said)
    assert "UserWarning" not in err and "__main__" not in err
