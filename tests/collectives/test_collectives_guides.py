"""docs/guide/collectives.md's and docs/guide/calibration.md's examples print what the pages say
they print (adv19d F6: eight figures had drifted from the code's). tests/test_docs.py runs the
examples; this checks their printed lines and the figures the text quotes from them."""

import re
import warnings
from pathlib import Path

import pytest

from ..helpers import guide_blocks, printed_lines

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guide"
COLLECTIVES, CALIBRATION = DOCS / "collectives.md", DOCS / "calibration.md"


def _text(path):
    return " ".join(path.read_text().split())


def _comments_after_prints(code):
    """The ``# ...`` lines that follow a block's last print (the lines it prints, one each)."""
    lines = code.splitlines()
    last = max(i for i, line in enumerate(lines) if "print(" in line)
    return [line[2:] for line in lines[last + 1:] if line.startswith("# ")]


def _run(code, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return printed_lines(code, name)


def test_the_first_collectives_example_prints_the_page_s_three_rows():
    code = guide_blocks(COLLECTIVES, lambda c: "for size in (2**10, 2**20, 2**33)" in c)
    assert len(code) == 1
    expected = _comments_after_prints(code[0])
    assert len(expected) == 3 and expected[1].startswith("1048576 tree LL128")
    assert _run(code[0], "docs/guide/collectives.md block 1") == expected


def test_the_concurrent_example_and_the_times_its_text_quotes():
    import topologies as tp
    import flowsolver as fs

    code = guide_blocks(COLLECTIVES, lambda c: "fs.concurrent(g, jobs)" in c)
    assert len(code) == 1
    said = _comments_after_prints(code[0])[0].partition(": no slowdown")[0]
    assert _run(code[0], "docs/guide/collectives.md concurrent block") == [said]
    # the text: NVLSTree alone in collective(), the ring alone in concurrent and in collective()
    g = tp.rail_optimized(nodes=2)
    evens = list(range(0, 16, 2))
    nvls_tree = fs.collective(g, "all_reduce", 2**28, ranks=evens).time * 1e3
    ring = fs.collective(g, "all_reduce", 2**28, ranks=evens, algorithm="ring").time * 1e3
    alone = fs.concurrent(g, [dict(op="all_reduce", size=2**28, ranks=evens)]).alone[0] * 1e3
    text = _text(COLLECTIVES)
    assert f"({nvls_tree:.2f} ms in collective())" in text
    assert f"`collective` gives NVLSTree's {nvls_tree:.2f} ms" in text
    assert (f"the same ring all-reduce is {alone:.2f} ms alone in `concurrent` and {ring:.2f} ms in "
            f"`collective(..., algorithm=\"ring\")`") in text


def test_the_calibration_example_prints_the_figures_its_comments_give():
    code = guide_blocks(CALIBRATION, lambda c: "fs.calibrate(one, [df]" in c)
    assert len(code) == 1
    printed = _run(code[0], "docs/guide/calibration.md block 1")
    comment = {m.group(1): m.group(2) for m in re.finditer(r"^print\((.*?)\)\s+# (.*)$", code[0], re.M)}
    # bandwidth 1.009 x +- 0.049, fill_ring 0.62 +- 0.40 steps: the report's lines, to the digits the comment gives
    said = re.match(r"bandwidth ([\d.]+) x \+- ([\d.]+), fill_ring ([\d.]+) \+- ([\d.]+) steps",
                    comment["cal.report()"]).groups()
    report = {line.split()[0]: line.split() for line in printed if line.split()}
    assert report["bandwidth"][1] == said[0] and report["bandwidth"][4] == said[1]
    assert f"{float(report['fill_ring'][1]):.2f}" == said[2] and f"{float(report['fill_ring'][4]):.2f}" == said[3]
    assert all("not constrained" in " ".join(report[q]) for q in ("net_latency", "launch_latency"))
    # {'nvlink4': 0.83...}: the efficiency's line starts with the comment's digits
    efficiency = next(line for line in printed if line.startswith("{'nvlink4'"))
    assert efficiency.startswith(comment["cal.efficiency"].removesuffix("...}"))
    # 10165 (measured 10505: 3.2 % fast): the 4 GiB row's time, and its error against the figure given
    time_line = next(line for line in printed if line.endswith(" us"))
    timed, measured, error = re.match(r"(\d+) \(measured (\d+): ([\d.]+) % fast\)",
                                      next(v for k, v in comment.items() if "2**32" in k)).groups()
    assert time_line == f"{timed} us"
    assert f"{(1 - int(timed) / int(measured)) * 100:.1f}" == error
