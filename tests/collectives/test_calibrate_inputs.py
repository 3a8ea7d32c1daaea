"""calibrate's arguments and rows: an algorithm checked as collective() checks it, before the
rows are solved."""

import pytest

pytest.importorskip("pandas")

import topologies as tp  # noqa: E402
from flowsolver import ALGORITHMS, calibrate  # noqa: E402
from flowsolver.cli import main  # noqa: E402

# a one-node reduce-scatter (8 ranks by busbw / algbw), as nccl-tests prints it
LOG = """# Collective test starting: reduce_scatter_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong
   134217728       4194304     float     sum      -1    377.2  355.81  311.34      0
   268435456       8388608     float     sum      -1    709.7  378.22  330.94      0
   536870912      16777216     float     sum      -1   1377.8  389.65  340.94      0
"""


def _refused(op, got):
    # collective()'s wording (options.check_algorithm): the op's algorithms from the registry
    return f"algorithm for {op} must be 'auto' or one of {', '.join(ALGORITHMS[op])}, got {got!r}"


@pytest.mark.parametrize("algorithm", ["rign", "direct", "binomial", "pat"])
def test_an_algorithm_the_op_lacks_is_refused_as_collective_refuses_it(algorithm):
    # a typo was a KeyError from the registry, another op's algorithm KeyError 'reduce_scatter'
    # from the schedule code, after the logs were read (PAT runs reduce-scatter, not all-reduce)
    g = tp.rail_optimized(nodes=1)
    if algorithm != "pat":
        with pytest.raises(ValueError) as err:
            calibrate(g, [LOG], algorithm=algorithm)        # the op from the log
        assert str(err.value) == _refused("reduce_scatter", algorithm)
    with pytest.raises(ValueError) as err:                  # op given: before any log is read
        calibrate(g, ["/no/such/file.log"], op="all_reduce", algorithm=algorithm)
    assert str(err.value) == _refused("all_reduce", algorithm)


def test_the_command_line_names_algorithm(capsys, tmp_path):
    log = tmp_path / "rs.log"
    log.write_text(LOG)
    # a name neither NCCL nor flowsolver knows: argparse's error, naming the option and what it takes
    assert main(["calibrate", str(log), "--nodes", "1", "--algorithm", "rign"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("flowsolver calibrate: error: argument --algorithm: 'rign' is not one of NCCL's names")
    assert "it takes auto or what NCCL_ALGO takes" in err
    # another op's algorithm, --op given: refused before any log is read (none.log does not exist)
    assert main(["calibrate", str(tmp_path / "none.log"), "--op", "all_reduce", "--algorithm", "direct"]) == 2
    assert capsys.readouterr().err.strip() == ("flowsolver: error: --algorithm 'direct' for all_reduce: none of "
                                               f"direct runs all_reduce (it runs {', '.join(ALGORITHMS['all_reduce'])})")


def _named_repeats(copies):
    """nccl-tests.read warns where a table gives its sizes more than once (-N cycles, runs pasted)."""
    import contextlib
    return pytest.warns(RuntimeWarning, match="times each") if copies > 1 else contextlib.nullcontext()


@pytest.mark.parametrize("copies", [1, 2, 5])
def test_repeats_of_one_size_are_one_size_and_constrain_nothing(copies):
    # nccl-tests -N 2 repeats the size loop under one header (src/common.cu, run_cycles), and two
    # runs pasted together repeat every size: one measurement, fitted exactly whatever its misfit.
    # Counted as rows, the 1 GiB row twice made the bandwidth 'constrained' to +-0.7 %
    g = tp.rail_optimized(nodes=1)
    one = "\n".join(LOG.splitlines()[:2] + [LOG.splitlines()[4]] * copies)        # 512 MiB
    with _named_repeats(copies):                                    # the reader names the repeated size
        cal = calibrate(g, [one])
    bandwidth = next(p for p in cal.parameters if p.name == "bandwidth")
    assert not bandwidth.constrained and bandwidth.uncertainty is None and bandwidth.value == 1.0
    assert "bandwidth" in cal.unconstrained and cal.efficiency == {}
    # two sizes of its own constrain it (both > 80 % transfer: 256 and 512 MiB)
    two = "\n".join(LOG.splitlines()[:2] + [LOG.splitlines()[3], LOG.splitlines()[4]] * copies)
    with _named_repeats(copies):
        assert next(p for p in calibrate(g, [two]).parameters if p.name == "bandwidth").constrained


def test_repeated_rows_tell_what_one_copy_tells():
    # k copies of a log's rows (nccl-tests -N k) are one measurement each: the same fit and the
    # same uncertainty as the rows once (counted as rows, 4 copies halved every uncertainty)
    g = tp.rail_optimized(nodes=1)
    head, rows = LOG.splitlines()[:2], LOG.splitlines()[2:]
    once = calibrate(g, ["\n".join(head + rows)])
    with _named_repeats(4):                                         # -N cycles: named, every row kept
        four = calibrate(g, ["\n".join(head + rows * 4)])
    for a, b in zip(once.parameters, four.parameters):
        assert (a.name, a.constrained) == (b.name, b.constrained)
        assert b.value == pytest.approx(a.value, rel=1e-2)          # the optimiser's tolerance (flat directions)
        if a.uncertainty is not None:
            assert b.uncertainty == pytest.approx(a.uncertainty, rel=2e-2)     # (as rows: half)
    assert any(p.uncertainty is not None for p in once.parameters)       # something was fitted
