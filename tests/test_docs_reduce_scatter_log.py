"""README.md and docs/accuracy.md on the one 8-GPU H100 reduce-scatter log (adv20c F10: both said
the pipeline runs 7-18 % slow at 128-512 MiB; the code gives +15.3 / +18.0 / +12.9 %). The errors
are the model's time against the log's measured out-of-place times."""

import re
from pathlib import Path

import pytest

import flowsolver as fs
import topologies as tp

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT.parent / "shared" / "data" / "nccl-tests" / "nccl1047_1xH100_reducescatter_ring.txt"
MiB = 2**20


def _measured():
    """{size bytes: out-of-place time us} read straight from the log's columns (size, count,
    type, redop, root, time, ...)."""
    out = {}
    for line in LOG.read_text().splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0].isdigit() and cols[2] == "float":
            out[int(cols[0])] = float(cols[5])
    return out


@pytest.mark.skipif(not LOG.exists(), reason="../shared/data is not beside this checkout")
def test_the_pipeline_s_error_on_the_h100_reduce_scatter_log():
    measured = _measured()
    g = tp.rail_optimized(nodes=1)
    err = {}
    for size in (128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB, 2048 * MiB, 4096 * MiB):
        r = fs.collective(g, "reduce_scatter", float(size), algorithm="ring")
        err[size] = (r.time * 1e6 / measured[size] - 1) * 100
    mid = [err[s] for s in (128 * MiB, 256 * MiB, 512 * MiB)]
    big = [err[s] for s in (1024 * MiB, 2048 * MiB, 4096 * MiB)]
    span = f"{min(mid):.0f}-{max(mid):.0f} %"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"reduce-scatter log we have runs {span} slow at 128-512 MiB" in readme
    accuracy = " ".join((ROOT / "docs" / "accuracy.md").read_text().split())
    said = (f"the model is {span} slow at 128-512 MiB (" + " / ".join(f"{e:+.1f}" for e in mid) + " %; "
            + " / ".join(f"{e:+.1f}" for e in big) + " % at 1-4 GiB)")
    assert said in accuracy, said
    (study,) = re.findall(r"the pipeline is (\d+) % slow at that size", " ".join(
        (ROOT / "docs" / "guide" / "study.md").read_text().split()))
    assert int(study) == round(err[128 * MiB])             # study.md's 128 MiB figure, which held
