"""``calibrate --save FILE.json`` and ``collective`` / ``train --calibration FILE.json``: a
calibration the command line carries, timing what the API times with ``model=``."""

import json

import pytest

import topologies as tp
from flowsolver import Calibration, collective, training_step
from flowsolver.cli import main

from .test_cli import _LOG

# NVLink 4 at 0.6 of its raw rate (the catalogue's is higher): every NVLink-bound time moves
CAL = Calibration(efficiency={"nvlink4": 0.6}, latency_scale=1.0, ranks=8, ops=("all_reduce",))


def test_collective_times_what_the_api_times_with_the_calibration(capsys, tmp_path):
    path = tmp_path / "cal.json"
    CAL.save(path)
    assert main(["collective", "--nodes", "1", "-b", "1K", "-e", "256M", "-f", "64", "--json",
                 "--calibration", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    g = tp.rail_optimized(nodes=1)
    for r in rows:
        assert r["time_us"] == pytest.approx(collective(g, "all_reduce", r["size"], model=CAL).time * 1e6, rel=1e-12)
    # the calibration was applied: at 256 MiB (bandwidth-bound on NVLink) it is slower than the library's
    assert rows[-1]["time_us"] > collective(g, "all_reduce", rows[-1]["size"]).time * 1e6 * 1.05
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "1M", "--calibration", str(path)]) == 0
    assert f"; calibration {path})" in capsys.readouterr().out.splitlines()[0]


def test_train_times_what_the_api_times_with_the_calibration(capsys, tmp_path):
    path = tmp_path / "cal.json"
    CAL.save(path)
    argv = ["train", "--nodes", "1", "--model", "llama-3-8b", "--tp", "8", "--global-batch", "8", "--json"]
    assert main([*argv, "--calibration", str(path)]) == 0
    got = json.loads(capsys.readouterr().out)["summary"]["step_time_s"]
    g = tp.rail_optimized(nodes=1)
    kw = dict(tp=8, global_batch=8)
    from flowsolver.training import step_arguments

    want = training_step(g, **step_arguments(model="llama-3-8b", collective_options=dict(policy="ecmp", model=CAL),
                                             **kw)).step_time
    plain = training_step(g, **step_arguments(model="llama-3-8b", collective_options=dict(policy="ecmp"),
                                              **kw)).step_time
    assert got == pytest.approx(want, rel=1e-12) and want > plain


def test_calibrate_saves_what_it_fitted(capsys, tmp_path):
    pytest.importorskip("pandas")
    from flowsolver import calibrate

    log, path = tmp_path / "rs.log", tmp_path / "cal.json"
    log.write_text(_LOG)
    assert main(["calibrate", str(log), "--nodes", "1", "--save", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (f"calibration written to {path} (collective / train "
                                                        f"--calibration {path})")
    cal = calibrate(tp.rail_optimized(nodes=1), [str(log)])
    assert Calibration.load(path) == Calibration(**{**cal.__dict__, "residuals": None})


@pytest.mark.parametrize("text, said", [
    ('{"format": "flowsolver-calibration", "version": 7}', "is of format version 7; this flowsolver reads version 1"),
    ("not json", "is not JSON"),
])
def test_a_bad_file_is_one_line_naming_the_option_and_the_file(capsys, tmp_path, text, said):
    path = tmp_path / "cal.json"
    path.write_text(text)
    for argv in (["collective", "--nodes", "1", "-b", "1M", "-e", "1M"], ["train", "--nodes", "1"]):
        assert main([*argv, "--calibration", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"flowsolver: error: --calibration: calibration file {str(path)!r} {said}")
    assert main(["collective", "--nodes", "1", "--calibration", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.strip() == (f"flowsolver: error: --calibration: cannot read "
                                               f"{str(tmp_path / 'none.json')!r}: no such file")


def test_a_calibration_of_another_fabric_is_said_to_change_no_link(capsys, tmp_path):
    # a fit of InfiniBand NDR carried to a RoCE cluster: no link is ib_ndr, so its efficiency
    # changes nothing (the time is the library's own); the command says so on stderr
    path = tmp_path / "ndr.json"
    Calibration(efficiency={"ib_ndr": 0.5}, latency_scale=1.0, ranks=16, ops=("all_reduce",)).save(path)
    argv = ["collective", "--nodes", "2", "-b", "1G", "-e", "1G", "--json", "--calibration", str(path)]
    assert main([*argv, "--link", "roce_400g"]) == 0
    out = capsys.readouterr()
    g = tp.rail_optimized(nodes=2, link="roce_400g")
    assert json.loads(out.out)[0]["time_us"] == pytest.approx(collective(g, "all_reduce", 2**30).time * 1e6)
    assert "name no link of this cluster" in out.err and "ib_ndr" in out.err
    assert main([*argv, "--link", "ib_ndr"]) == 0                    # its own fabric: applied, nothing said
    assert "warning" not in capsys.readouterr().err


def test_the_calibration_warning_is_said_once_in_the_clis_words(capsys, tmp_path):
    """newuser25 #6: the library's UserWarning (adv25 F7) printed beside the CLI's own line, as a
    Python warning with its source line; and a fit whose nvlink4 is absent while its ib_ndr is
    here (review25 F8) is said too, naming what applies."""
    path = tmp_path / "mixed.json"
    Calibration(efficiency={"ib_ndr": 0.9, "nvlink3": 0.7}, latency_scale=1.0, ranks=16, ops=("all_reduce",)).save(path)
    assert main(["collective", "--nodes", "2", "-b", "1G", "-e", "1G", "--calibration", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("flowsolver: warning") == 1 and "UserWarning" not in err
    assert "its efficiencies (nvlink3) name no link" in err and "its ib_ndr, latencies and pipeline apply" in err


def test_a_calibration_naming_no_technology_at_all_is_an_error_not_a_warning(capsys, tmp_path):
    # "ib-ndr" is neither a link of the cluster nor in the catalogue (a typo of ib_ndr): refused
    # as efficiency={"ib-ndr": ...} is, before any solve, for collective and train alike
    path = tmp_path / "typo.json"
    Calibration(efficiency={"ib-ndr": 0.5}, latency_scale=1.0, ranks=8, ops=("all_reduce",)).save(path)
    for argv in (["collective", "--nodes", "1", "-b", "1M", "-e", "1M"], ["train", "--nodes", "1"]):
        assert main([*argv, "--calibration", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"flowsolver: error: --calibration {path}: model (a Calibration): efficiency "
                              "names unknown link technology 'ib-ndr'") and "warning" not in err
