"""What `flowsolver collective` and `calibrate` say beside their numbers: the NCCL_ALGO /
NCCL_PROTO limits, the reduction and a -g log's host thread in the header; -b / -e choosing a
compared log's rows; a fitted quantity a limit stopped (an efficiency at its cap of 1, a latency
at 0)."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.cli import main

from ..collectives.test_nccl_op_rules import _log


def _out(capsys, argv):
    assert main(argv) == 0
    return capsys.readouterr().out


def test_the_header_says_the_limits_and_the_reduction(capsys):
    out = _out(capsys, ["collective", "--nodes", "2", "-b", "1M", "-e", "1M", "--algorithm", "Ring,Tree",
                        "--protocol", "^LL128"])
    assert "# algorithm ring,tree, protocol LL,Simple" in out
    out = _out(capsys, ["collective", "--nodes", "1", "-b", "1G", "-e", "1G", "--redop", "avg"])
    assert "# reduction avg of float" in out
    plain = _out(capsys, ["collective", "--nodes", "1", "-b", "1G", "-e", "1G"])
    assert "# algorithm" not in plain and "# reduction" not in plain


def test_b_and_e_choose_a_compared_logs_rows(tmp_path, capsys):
    g = tp.rail_optimized(1)
    sizes = (64 << 20, 256 << 20)
    times = [collective(g, "all_reduce", s).time * 1e6 for s in sizes]
    path = tmp_path / "sum.log"
    path.write_text(_log("sum", "float", sizes, times))
    out = _out(capsys, ["collective", "--nodes", "1", "--op", "all_reduce", "--compare", str(path), "-b", "100M"])
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith(("#", " " * 6 + "size"))]
    assert [int(r[0]) for r in rows] == [256 << 20]
    assert main(["collective", "--nodes", "1", "--op", "all_reduce", "--compare", str(path), "-b", "1G"]) == 2
    assert "no row between" in capsys.readouterr().err


def test_calibrate_says_where_a_limit_stopped_the_fit(tmp_path, capsys):
    # a log twice as fast as the library at 64-256 MiB on one DGX H100 (NVLink-bound): the
    # bandwidth factor near 2 asks NVLink for ~2 x its library efficiency, above the cap of 1
    from flowsolver.routing import link_efficiency
    g = tp.rail_optimized(1)
    sizes = (64 << 20, 256 << 20)
    half = [collective(g, "all_reduce", s).time * 1e6 / 2 for s in sizes]
    path = tmp_path / "fast.log"
    path.write_text(_log("sum", "float", sizes, half))
    assert 2 * link_efficiency("nvlink4", None) > 1
    out = _out(capsys, ["calibrate", str(path), "--nodes", "1", "--op", "all_reduce"])
    assert "# note: nvlink4 at 1.000, its cap" in out
    # the library's own times: nothing capped
    own = tmp_path / "own.log"
    own.write_text(_log("sum", "float", sizes, [t * 2 for t in half]))
    assert "# note" not in _out(capsys, ["calibrate", str(own), "--nodes", "1", "--op", "all_reduce"])
