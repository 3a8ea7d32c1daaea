"""docs/design.md run top to bottom prints its cost table (adv20c F6): its "put your quotes in"
block registered a 64 x 400G InfiniBand switch at 18,000 USD with ``tp.register_part``, which the
bill's automatic choice (the slowest, then cheapest, switch with enough ports) then took for
every later InfiniBand bill of the process, so the page's cost block printed NDR at 6,395 USD a
GPU where the page shows 8,926. tests/study/test_study_pages.py runs the cost block alone and
tests/test_docs.py runs the blocks in order without comparing; this runs them in order, in a
fresh interpreter (the part catalogue is global to a process and has no removal), and compares.
The two ``fs.design`` search blocks are left out (tens of seconds; they register nothing). The
page now registers its own switch in its last section, after every figure it prints."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "design.md"
MARK = "=== the cost block ==="
_ENV = {**os.environ, "FLOWSOLVER_CACHE_DIR": "off", "PYTHONPATH": str(ROOT)}


def test_the_design_page_run_in_order_prints_its_cost_table():
    blocks = re.findall(r"```(\w*)\n(.*?)```", PAGE.read_text(), re.S)
    (at,) = [i for i, (lang, code) in enumerate(blocks) if lang == "python" and "format_costs(cost_study" in code]
    said = blocks[at + 1][1]
    assert blocks[at + 1][0] == "" and said.startswith("network ")
    before = [code for lang, code in blocks[:at] if lang == "python" and "fs.design(" not in code]
    assert not any("register_part" in code for code in before), "a part registered before the cost block"
    script = "\n".join(before) + f"\nprint({MARK!r})\n" + blocks[at][1]
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=_ENV)
    assert run.returncode == 0, run.stderr[-2000:]
    printed = run.stdout.split(MARK + "\n", 1)[1]
    assert printed.rstrip("\n").splitlines() == said.rstrip("\n").splitlines()


def test_the_page_says_what_registering_the_switch_would_do():
    """The page's figure for NDR with the switch registered is the bill's: 18,000 USD a switch
    in place of the Quantum-2's 36,000 on every NDR switch of the 8-DGX fabric (run in a fresh
    interpreter: registering changes the process's catalogue for good)."""
    script = """
import topologies as tp
from flowsolver.study import cluster
g = cluster("ib_ndr", 8)
before = tp.bill(g)
n = before.count("quantum2_qm9700")
tp.register_part(tp.Part("my_switch", "switch", 18000.0, 600.0, "quote", "datasheet", ports=64,
                         port_rate=400 * tp.Gbit, family="infiniband"), overwrite=True)
after = tp.bill(g)
print(n, after.count("my_switch"), before.gpus, round(before.price_per_gpu), round(after.price_per_gpu))
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=_ENV)
    assert run.returncode == 0, run.stderr[-2000:]
    switches, replaced, gpus, before, after = map(int, run.stdout.split())
    assert replaced == switches > 0
    assert abs((before - after) - switches * (36000 - 18000) / gpus) <= 1   # the switches' price difference
    text = " ".join(PAGE.read_text().split())
    assert f"show NDR at {after:,} USD a GPU instead of {before:,}" in text
