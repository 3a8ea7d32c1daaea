"""docs/serving.md's examples print what the page says they print: each ``print(...)`` line
followed by a ``# ...`` line is checked against that line (adv18b finding 3: the page's figures
had drifted from the code's, and its first example warned that it never reached steady state).
tests/test_docs.py runs the examples; this checks their figures, and that none warns."""

import re
import warnings
from pathlib import Path

import pytest

from ..helpers import guide_blocks, printed_lines

PAGE = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def _expected(code: str) -> list:
    """The ``# ...`` line after each top-level print."""
    lines = code.splitlines()
    return [after[2:].rstrip() for line, after in zip(lines, lines[1:])
            if line.startswith("print(") and after.startswith("# ")]


def _blocks():
    return guide_blocks(PAGE, _expected)


def test_the_page_has_printed_figures_to_check():
    assert len(_blocks()) >= 2


@pytest.mark.slow          # ~10 s of CPU: Llama 3 70B served co-located and disaggregated on 16 H100
@pytest.mark.parametrize("index", range(len(_blocks())))
def test_the_pages_printed_figures_are_what_its_code_prints_without_a_warning(index):
    code = _blocks()[index]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # a run too short for steady state warns
        printed = printed_lines(code, f"docs/serving.md block {index + 1}")
    assert printed == _expected(code)


def test_the_figures_in_the_text_are_the_code_s():
    # the steady-state section's 1,024- and 7,680-token outputs (Llama 3 8B, TP 8, one DGX H100,
    # 512-token prompts at 2 requests/s): TPOT and the duration a steady run needs, as printed
    import numpy as np
    import topologies as tp
    import flowsolver as fs
    text = " ".join(PAGE.read_text().split())
    g = tp.rail_optimized(nodes=1, server="dgx_h100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        short = fs.serve(g, "llama-3-8b", rate=2.0, duration=4.0, prompt=512, output=1024, tp=8)
        long = fs.serve(g, "llama-3-8b", rate=2.0, duration=4.0, prompt=512, output=7680, tp=8)
    life = lambda r, n: float(np.median(r.ttft + r.tpot * (n - 1)))
    said = (f"A 1,024-token output at ~{short.tpot_p50 * 1e3:.1f} ms a token on Llama 3 8B (TP 8, one DGX H100, "
            f"512-token prompts at 2 requests/s) lives ~{life(short, 1024):.1f} s and needs "
            f"~{short.needed_duration:.0f} s; 7,680 tokens (the most a 512-token prompt leaves of Llama 3 8B's "
            f"8,192-token context) live ~{life(long, 7680):.0f} s and need ~{long.needed_duration:.0f} s")
    assert said in text
    assert re.search(r"8,192 tokens need", text) is None          # beyond the context: serve refuses it
