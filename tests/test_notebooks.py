"""The notebooks are committed with their outputs (figures visible on a code host) and
each has a parameters cell. ``--nbmake notebooks`` in the test command checks that they
still execute; the tests here check that the stored outputs are fresh: executed top to
bottom in one run, without errors, every figure stored as a PNG, and stamped with the
hash of the code cells they came from (``python notebooks/refresh.py``
re-executes them and stamps it), so editing a code cell without re-executing fails."""

import base64
import hashlib
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def _load(path):
    return json.loads(path.read_text())


def _code(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _source(cell):
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def test_the_notebooks_exist():
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert len(set(numbers)) == len(numbers)                # one notebook a number
    assert {"01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11"} <= set(numbers)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_parameters_cell_comes_first(path):
    assert "parameters" in _code(_load(path))[0]["metadata"].get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_from_one_run_top_to_bottom_without_errors(path):
    code = _code(_load(path))
    assert [c.get("execution_count") for c in code] == list(range(1, len(code) + 1)), \
        f"{path.name}: re-execute it (python notebooks/refresh.py {path.name})"
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{path.name} stores an error: {errors[0].get('ename')}"
    # cells that display something (their last line is an expression) have stored it
    assert all(c.get("outputs") for c in code if _source(c).strip().splitlines()[-1:] == ["fig"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_were_made_by_the_current_code(path):
    nb = _load(path)
    digest = hashlib.sha256()
    for cell in _code(nb):
        digest.update(_source(cell).encode() + b"\0")
    stamp = nb["metadata"].get("flowsolver", {}).get("code_sha256")
    assert stamp == digest.hexdigest(), \
        f"{path.name}: code changed since it was executed; run python notebooks/refresh.py {path.name}"


def _figure_cells(nb):
    """Code cells that end by returning a figure (their last line is ``fig``)."""
    return [c for c in _code(nb) if _source(c).strip().splitlines()[-1:] == ["fig"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_is_stored_as_a_modest_png(path):
    nb = _load(path)
    cells = _figure_cells(nb)
    assert cells, f"{path.name} draws no figure"
    for cell in cells:
        pngs = [o["data"]["image/png"] for o in cell["outputs"] if "image/png" in o.get("data", {})]
        assert len(pngs) == 1, f"{path.name}: a figure cell stores {len(pngs)} PNGs"
        data = base64.b64decode("".join(pngs[0]) if isinstance(pngs[0], list) else pngs[0])
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 400_000


def test_the_notebooks_stay_small():
    assert sum(p.stat().st_size for p in NOTEBOOKS) < 2_000_000           # bytes, outputs included
