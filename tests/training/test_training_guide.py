"""The training guide's examples print what the guide says they print: each ``print(...)`` line
of docs/guide/training.md followed by a ``# ...`` line is checked against that line (up to a
note after two spaces and a parenthesis, such as the published figure it is compared with).
tests/test_docs.py runs the examples; this checks their figures (adv17b finding 4: the guide
showed 1458 tokens/s per GPU, 655 TFLOP/s and 0.693 s of TP where the code gave 1414, 635 and
1.037)."""

import re
from pathlib import Path

import pytest

from ..helpers import guide_blocks, printed_lines

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "training.md"


def _expected(code: str) -> list:
    """The ``# ...`` line after each top-level print, its note (two spaces, then "(") cut."""
    lines = code.splitlines()
    out = []
    for line, after in zip(lines, lines[1:]):
        if line.startswith("print(") and after.startswith("# "):
            out.append(re.split(r"\s{2,}\(", after[2:])[0].rstrip())
    return out


def _blocks():
    return guide_blocks(GUIDE, _expected)


def test_the_guide_has_printed_figures_to_check():
    assert len(_blocks()) >= 1


@pytest.mark.slow          # ~5 s of CPU: the guide's 64-GPU Llama 3 70B step
@pytest.mark.parametrize("index", range(len(_blocks())))
def test_the_guides_printed_figures_are_what_its_code_prints(index):
    code = _blocks()[index]
    printed = printed_lines(code, f"docs/guide/training.md block {index + 1}")
    expected = _expected(code)
    # every print of these blocks writes one line, and each has its expected line after it
    assert printed == expected
