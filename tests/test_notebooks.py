"""The notebooks are stored without outputs and each has a parameters cell (they are
executed by ``--nbmake notebooks`` in the test command)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_the_seven_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs_and_with_parameters(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert "parameters" in code[0]["metadata"].get("tags", [])


def _figure_cells(nb):
    """Code cells that end by returning a figure (their last line is ``fig``)."""
    return [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
            and "".join(c["source"]).strip().splitlines()[-1:] == ["fig"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_displays_as_an_image(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.reads(path.read_text(), as_version=4)
    expected = _figure_cells(nb)
    assert expected, f"{path.name} draws no figure"
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for i in expected:
        kinds = [k for out in nb.cells[i].outputs for k in out.get("data", {})]
        assert "image/png" in kinds, f"{path.name} cell {i} shows {kinds}, not a PNG"
