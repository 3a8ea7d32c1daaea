"""A Calibration saved as JSON and loaded back: every field as it was (but the residuals), and
a file that is not one is an error naming the file and what is wrong."""

import json
from dataclasses import fields, replace

import pytest

import topologies as tp
from flowsolver import Calibration, collective
from flowsolver.collectives._calibration import FittedParameter

from ..helpers import written_calibration
from flowsolver.collectives._pipeline import Pipeline

# every field away from its default (a float that JSON's shortest repr must carry exactly)
CAL = Calibration(efficiency={"nvlink4": 0.7123456789012345, "ib_ndr": 0.85}, latency_scale=1.3, ranks=8,
                  ops=("all_reduce", "reduce_scatter"), converged=False, message="the fit did not converge",
                  pipeline=Pipeline(floor_simple=1e-6, floor_nvls=2e-6, fill_ring=2.5, fill_tree=0.5, fill_nvls=3.5),
                  unconstrained=("p2p_bandwidth",), ll_bandwidth=0.9, p2p_bandwidth=1.1, net_latency=1.5e-6,
                  launch_latency=2.5e-6,
                  parameters=(FittedParameter("bandwidth", 0.96, 1.0, 0.02, True, "x"),
                              FittedParameter("p2p_bandwidth", 1.0, 1.0, None, False, "x")))


def test_every_field_comes_back_exactly(tmp_path):
    path = tmp_path / "cal.json"
    CAL.save(path)
    back = Calibration.load(path)
    for f in fields(Calibration):
        assert getattr(back, f.name) == getattr(CAL, f.name), f.name
    assert json.loads(path.read_text())["version"] == 1


def test_a_fitted_calibration_comes_back_but_its_residuals(tmp_path):
    pytest.importorskip("pandas")
    from flowsolver import calibrate

    from .test_calibrate_inputs import LOG

    cal = calibrate(tp.rail_optimized(nodes=1), [LOG])
    cal.save(tmp_path / "cal.json")
    back = Calibration.load(tmp_path / "cal.json")
    assert back.residuals is None and back == replace(cal, residuals=None)
    g = tp.rail_optimized(nodes=1)
    assert collective(g, "reduce_scatter", 2**28, model=back).time == collective(g, "reduce_scatter", 2**28,
                                                                                  model=cal).time


def _written(tmp_path, change):
    return written_calibration(tmp_path, CAL, change)


@pytest.mark.parametrize("change, said", [
    (lambda d: d.update(version=2), "is of format version 2; this flowsolver reads version 1"),
    (lambda d: d.pop("version"), "is of format version None; this flowsolver reads version 1"),
    (lambda d: d.update(format="networkx"), "is not a flowsolver calibration (its 'format' is 'networkx'"),
    (lambda d: d["efficiency"].update(nvlink4=1.5), "efficiency['nvlink4'] must be in (0, 1], got 1.5"),
    (lambda d: d.update(latency_scale="1"), "'latency_scale' must be a number > 0, got '1'"),
    (lambda d: d["pipeline"].pop("fill_ring"), "'pipeline' must be an object with keys floor_simple"),
    (lambda d: d.update(ops=["allreduce"]), "'ops' names 'allreduce', not among all_reduce"),
    (lambda d: d.update(ranks=0), "'ranks' must be a whole number >= 1, got 0"),
    (lambda d: d.update(residuals=[]), "unknown key(s) residuals"),
    (lambda d: d["parameters"][0].update(value=None), "parameters[0]: 'value' must be a number > 0, got None"),
])
def test_a_file_that_is_not_a_calibration_names_itself_and_the_fault(tmp_path, change, said):
    path = _written(tmp_path, change)
    with pytest.raises(ValueError) as err:
        Calibration.load(path)
    assert str(err.value).startswith(f"calibration file {str(path)!r}") and said in str(err.value)


def test_text_that_is_not_json_or_not_an_object(tmp_path):
    path = tmp_path / "cal.json"
    for text, said in (("{", "is not JSON"), ("[1, 2]", "is not a flowsolver calibration (its 'format' is 'list'")):
        path.write_text(text)
        with pytest.raises(ValueError) as err:
            Calibration.load(path)
        assert str(err.value).startswith(f"calibration file {str(path)!r} {said}")
    with pytest.raises(FileNotFoundError):
        Calibration.load(tmp_path / "none.json")


@pytest.mark.parametrize("key, first, second", [("latency_scale", "1.3", "4.0"), ("ib_ndr", "0.85", "0.5")])
def test_a_key_given_twice_is_refused_not_the_last_taken(tmp_path, key, first, second):
    # JSON keeps the last of two values: a file naming latency_scale 1.3 then 4.0 loaded as 4.0
    path = tmp_path / "cal.json"
    CAL.save(path)
    text = path.read_text()
    assert f'"{key}": {first}' in text
    path.write_text(text.replace(f'"{key}": {first}', f'"{key}": {first}, "{key}": {second}', 1))
    with pytest.raises(ValueError) as err:
        Calibration.load(path)
    assert str(err.value).startswith(f"calibration file {str(path)!r}")
    assert f"the key {key!r} appears twice" in str(err.value)


def test_a_calibration_naming_a_technology_of_no_link_is_refused_as_efficiency_is():
    from flowsolver import concurrent

    g = tp.rail_optimized(nodes=2)                          # links: ib_ndr, nvlink4, pcie5
    typo = Calibration(efficiency={"ib-ndr": 0.5}, latency_scale=1.0, ranks=16, ops=("all_reduce",))
    with pytest.raises(ValueError, match="efficiency names unknown link technology 'ib-ndr'") as plain:
        collective(g, "all_reduce", 2**30, efficiency={"ib-ndr": 0.5})
    for call in (lambda: collective(g, "all_reduce", 2**30, model=typo),
                 lambda: concurrent(g, [dict(op="all_reduce", size=2**30)], model=typo)):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == f"model (a Calibration): {plain.value}"
    # the right key halves NDR's rate: the 16-GPU all-reduce is slower than without it
    right = replace(typo, efficiency={"ib_ndr": 0.5})
    assert collective(g, "all_reduce", 2**30, model=right).time > collective(g, "all_reduce", 2**30).time


def test_a_calibration_whose_technologies_the_graph_lacks_says_so():
    """adv25 F7: a 2 x 8 H100 fit (nvlink4 at 0.654) used on an A100 cluster (nvlink3, ib_hdr)
    changed no link while its latencies applied, silently. It warns, naming the fitted
    technologies and the graph's; on the graph it fits it does not."""
    import warnings

    import topologies as tp
    from flowsolver import Calibration, collective
    cal = Calibration(efficiency={"nvlink4": 0.654}, latency_scale=1.0, ranks=16, ops=("all_reduce",))
    with pytest.warns(UserWarning, match=r"for nvlink4 apply to no link .*ib_hdr, nvlink3.*only its latencies"):
        collective(tp.rail_optimized(2, server="dgx_a100", link="ib_hdr"), "all_reduce", 2**30, model=cal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collective(tp.rail_optimized(2), "all_reduce", 2**30, model=cal)
    both = Calibration(efficiency={"nvlink4": 0.654, "ib_hdr": 0.9}, latency_scale=1.0, ranks=16, ops=("all_reduce",))
    with pytest.warns(UserWarning, match=r"for nvlink4 apply to no link .* its ib_hdr and latencies apply"):
        collective(tp.rail_optimized(2, server="dgx_a100", link="ib_hdr"), "all_reduce", 2**30, model=both)
