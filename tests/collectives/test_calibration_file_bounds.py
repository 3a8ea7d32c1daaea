"""A calibration file (or a Calibration) whose latencies are negative, or whose parameters hold an
impossible value, is refused naming the field: a negative launch latency priced a 1 KiB all-reduce
at -34.8 us (collective() adds it to every call's time)."""

import pytest

from flowsolver import Calibration
from flowsolver.collectives._calibration import FittedParameter

from ..helpers import written_calibration

CAL = Calibration(efficiency={"nvlink4": 0.8}, latency_scale=1.0, ranks=8, ops=("all_reduce",),
                  launch_latency=5e-6, net_latency=2e-6,
                  parameters=(FittedParameter("launch_latency", 5e-6, 0.0, 1e-6, True, "s"),
                              FittedParameter("bandwidth", 0.97, 1.0, 0.01, True, "x")))


def _written(tmp_path, change):
    return written_calibration(tmp_path, CAL, change)


@pytest.mark.parametrize("change, said", [
    (lambda d: d.update(launch_latency=-50e-6), r"'launch_latency' must be a number >= 0, got -5e-05"),
    (lambda d: d.update(net_latency=-1e-6), r"'net_latency' must be a number >= 0"),
    (lambda d: d["parameters"][0].update(value=-5e-6), r"parameters\[0\]: 'value' must be a number >= 0"),
    (lambda d: d["parameters"][0].update(uncertainty=-1e-6), r"parameters\[0\]: 'uncertainty' must be a number >= 0"),
    (lambda d: d["parameters"][1].update(value=0.0), r"parameters\[1\]: 'value' must be a number > 0"),
])
def test_a_negative_latency_or_impossible_parameter_is_refused_naming_it(tmp_path, change, said):
    assert Calibration.load(_written(tmp_path, lambda d: None)) == CAL       # the file unchanged loads
    with pytest.raises(ValueError, match=said):
        Calibration.load(_written(tmp_path, change))


@pytest.mark.parametrize("field", ["launch_latency", "net_latency"])
def test_a_calibration_with_a_negative_latency_is_refused(field):
    with pytest.raises(ValueError, match=f"Calibration: {field} must be a number >= 0"):
        Calibration(efficiency={}, latency_scale=1.0, ranks=8, ops=(), **{field: -50e-6})
