"""The notebooks' markdown says what their stored outputs (and the code) show (adv20c F2, F3:
notebook 03 said the ring all-reduce takes the same time on the fat-tree, DragonFly and torus,
its stored table said 5.28 / 5.28 / 7.80 ms; notebook 04 gave the intact ring's transfer per
step as 9.2 us and the failed rates as 3/4 and 3/8 of it where its table says 7.2, 12.2 and
24.4 us). The tables are read from the stored outputs (tests/test_notebooks.py checks that they
come from the current code cells); the protocol behind notebook 03's torus is re-run."""

import json
import re
from pathlib import Path

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._nccl_model import PATH_PHB, PATH_PXN

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _cells(name):
    return json.loads((NOTEBOOKS / name).read_text())["cells"]


def _markdown(name):
    return [" ".join("".join(c["source"]).split()) for c in _cells(name) if c["cell_type"] == "markdown"]


def _stored_table(name, cell):
    """The rows of a DataFrame's stored text output, split on whitespace (wrapped blocks joined
    by their row index)."""
    (out,) = [o for o in _cells(name)[cell]["outputs"] if "text/plain" in o.get("data", {})]
    text = "".join(out["data"]["text/plain"])
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\d+)\s+(.*)$", line)
        if m:
            rows.setdefault(int(m.group(1)), []).extend(m.group(2).split())
    return [rows[i] for i in sorted(rows)]


def test_notebook_03_says_why_the_torus_ring_is_slower():
    name = "03_topology_families.ipynb"
    rows = _stored_table(name, 3)          # family, gpus, ..., bisection_TBps (3.2), ..., allreduce_ms, alltoall_ms[, tier]
    # the times are the columns printed with six decimals: allreduce_ms, then alltoall_ms
    allreduce = [float([x for x in r if re.fullmatch(r"\d+\.\d{6}", x)][0]) for r in rows]
    fat, dfly, torus = allreduce
    assert fat == dfly and torus > fat
    cell = next(t for t in _markdown(name) if "The ring all-reduce" in t)
    assert f"it takes the same time ({fat:.2f} ms)" in cell
    assert f"The torus takes {torus:.2f} ms, {(torus / fat - 1) * 100:.0f} % longer" in cell
    # the reason: the torus's chips have no NIC path within PXN, so NCCL's default turns LL128 off
    r_torus = fs.collective(tp.torus((4, 4, 8)), "all_reduce", 2**26, algorithm="ring", policy="dor")
    r_fat = fs.collective(tp.fat_tree(8), "all_reduce", 2**26, algorithm="ring", policy="ecmp")
    assert (r_fat.protocol, r_torus.protocol) == ("LL128", "LL")
    assert "ring/LL128" not in r_torus.estimates and "ring/LL128" in r_fat.estimates
    assert PATH_PHB > PATH_PXN
    assert round(r_torus.time * 1e3, 2) == round(torus, 2) and round(r_fat.time * 1e3, 2) == round(fat, 2)
    t, f = r_torus.steps[0], r_fat.steps[0]
    assert (f"{t.transfer * 1e6:.1f} µs of transfer a step against LL128's {f.transfer * 1e6:.1f} µs on the "
            f"fat-tree, with {t.latency * 1e6:.1f} µs of latency against {f.latency * 1e6:.1f}") in cell
    fat_ll = fs.collective(tp.fat_tree(8), "all_reduce", 2**26, algorithm="ring", policy="ecmp", protocol="LL")
    assert fat_ll.time == r_torus.time       # the same protocol: the same time, whatever the fabric
    assert f"the fat-tree takes the same {fat_ll.time * 1e3:.2f} ms" in cell


def test_notebook_04_gives_its_table_s_transfer_per_step_and_ratios():
    name = "04_failures_and_hashing.ipynb"
    rows = _stored_table(name, 2)          # fail_fraction seed failed busbw_GBps step_transfer_us bottleneck
    by_fraction = {}
    for frac, seed, failed, busbw, transfer, tier in rows:
        by_fraction.setdefault(float(frac), set()).add((float(busbw), float(transfer), tier))
    assert all(len(v) == 1 for v in by_fraction.values())        # both seeds give the same row
    (intact,), (five,), (ten,) = (by_fraction[f] for f in (0.0, 0.05, 0.1))
    assert (intact[2], five[2], ten[2]) == ("access", "edge-agg", "edge-agg")
    cell = next(t for t in _markdown(name) if t.startswith("Different seeds"))
    assert "Intact, the ring is held at the servers' NICs (`access`" in cell and "at an edge-agg cable" in cell
    said = (f"grows from {intact[1]:.1f} µs to {five[1]:.1f} µs at 5 % ({intact[1] / five[1]:.2f} of the intact "
            f"rate) and to {ten[1]:.1f} µs at 10 % ({intact[1] / ten[1]:.2f} of it, half the rate at 5 %)")
    assert said in cell, said
    assert abs(ten[1] / five[1] - 2) < 1e-3
    said = (f"busbw falls a little less (to {five[0] / intact[0]:.2f} and {ten[0] / intact[0]:.2f} of the intact "
            f"{intact[0]:.0f} GB/s)")
    assert said in cell, said
    assert five[0] / intact[0] > intact[1] / five[1] and ten[0] / intact[0] > intact[1] / ten[1]
