"""docs/guide/sweeps.md's examples print what the guide says they print (adv17c finding 2: the
sweep example showed 0.000714 s and 1.761836e+11 bytes/s for both links on two nodes where the
code gave 0.000477 / 2.638758e+11 over NDR and 0.000471 / 2.668724e+11 over RoCE); and
docs/guide/cli.md's --redop figures are what one DGX H100's all-reduce of 1 GiB takes.

The printed lines of a block are the ``# ...`` lines that end it, after its last line of code;
a note after two spaces and a parenthesis (what a figure means) is cut."""

import re
from pathlib import Path

import pytest

from ..helpers import guide_blocks, printed_lines

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guide"


def _expected(code: str) -> list:
    """The ``# `` lines that end the block (its printed output), each note cut."""
    out = []
    for line in reversed(code.rstrip("\n").splitlines()):
        if not line.startswith("#"):
            break
        out.append(re.split(r"\s{2,}\(", line[2:])[0].rstrip())
    return out[::-1]


def _blocks():
    return guide_blocks(DOCS / "sweeps.md", _expected)


def test_the_guide_has_printed_figures_to_check():
    assert len(_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_the_sweeps_guides_printed_figures_are_what_its_code_prints(index):
    code = _blocks()[index]
    printed = printed_lines(code, f"docs/guide/sweeps.md block {index + 1}")
    assert [line.rstrip() for line in printed] == _expected(code)


def test_the_cli_guides_redop_figures_are_what_the_command_prints(capsys):
    from flowsolver.cli import main

    said = re.search(r"`--redop avg` on one DGX\s+H100 at 1 GiB is a ring \(([\d.]+) ms\) where the sum is NVLS "
                     r"\(([\d.]+) ms\)", (DOCS / "cli.md").read_text())
    assert said, "docs/guide/cli.md no longer gives the --redop example"
    for redop, (algorithm, ms) in zip(("avg", "sum"), (("ring", said[1]), ("nvls", said[2]))):
        assert main(["collective", "--nodes", "1", "-b", "1G", "-e", "1G", "--redop", redop]) == 0
        row = capsys.readouterr().out.strip().splitlines()[-1].split()     # size, time (us), algbw, busbw, algorithm
        assert row[0] == str(2**30) and row[4] == algorithm
        assert f"{float(row[1]) / 1e3:.2f}" == ms
