"""Bad seeds and rates are refused naming the parameter and the value typed (adv17b finding 6)."""

import pytest

import topologies as tp
from flowsolver.cli import main
from flowsolver.reliability import JobResponse, goodput, simulate_goodput

STEP = dict(op="all_reduce", size=2**20, algorithm="ring", compute=1.0, tokens=1e6)


@pytest.mark.parametrize("kw, match", [
    (dict(seed=-1), r"seed must be an integer >= 0, got -1"),
    (dict(seed=1.5), r"seed must be an integer >= 0, got 1.5"),
    (dict(seed=True), r"seed must be an integer >= 0, got True"),
    (dict(fabric_seed=-1), r"fabric_seed must be an integer >= 0, got -1"),
])
def test_goodput_refuses_a_bad_seed_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        goodput(tp.rail_optimized(2), STEP, JobResponse(30.0, 300.0), trajectories=5, **kw)


@pytest.mark.parametrize("seed", [-1, 2.0])
def test_simulate_goodput_refuses_a_bad_seed_by_name(seed):
    with pytest.raises(ValueError, match=rf"seed must be an integer >= 0, got {seed!r}"):
        simulate_goodput({"gpu": 1e-5}, JobResponse(30.0, 300.0), horizon=86400.0, trajectories=5, seed=seed)


def test_seed_zero_is_still_a_seed():
    r = goodput(tp.rail_optimized(2), STEP, JobResponse(30.0, 300.0), trajectories=5, days=1, seed=0)
    assert len(r.useful_fraction) == 5


@pytest.mark.parametrize("flags, message", [
    (["--mc-seed", "-1"], "--mc-seed must be an integer >= 0, got -1"),
    # the value typed, per day (not -1 / 86,400 = -1.157e-05 a second)
    (["--rate", "gpu=-1"], "--rate 'gpu=-1': PER_DAY must be a finite number >= 0 (events per unit per day), got -1"),
    (["--rate", "gpu=nan"], "--rate 'gpu=nan': PER_DAY must be a finite number >= 0"),
    (["--degrade", "access=-0.5,2,0.5"], "--degrade 'access=-0.5,2,0.5': PER_DAY must be a finite number >= 0 "
                                         "(events per unit per day), got -0.5"),
    (["--degrade", "access=0.01,-2,0.5"], "--degrade 'access=0.01,-2,0.5': HOURS must be a finite number > 0, "
                                          "got -2"),
    (["--straggler=-0.25,2,0.8"], "--straggler '-0.25,2,0.8': PER_DAY must be a finite number >= 0"),
])
def test_cli_reports_the_value_typed(capsys, flags, message):
    argv = ["goodput", "--nodes", "2", "--checkpoint-cost", "30", "--restart", "300", "--trajectories", "5"]
    assert main(argv + flags) == 2
    err = capsys.readouterr().err
    assert message in err and "e-05" not in err and "14400" not in err
