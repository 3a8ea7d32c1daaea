"""Re-execute the notebooks in place, with their outputs, and stamp each with the hash of
its code cells (tests/test_notebooks.py checks the stamp, so a notebook whose code changed
without being re-executed fails the tests).

    python notebooks/refresh.py                 # all of notebooks/
    python notebooks/refresh.py 04_failures_and_hashing.ipynb
    python notebooks/refresh.py --figures /tmp/nbfigs   # also write each PNG there

Prints each notebook's execution time (s) and size (kB). Needs nbclient and nbformat (the
``test`` extra, through nbmake). The kernel imports this checkout's flowsolver (its root is
put first on PYTHONPATH), from whatever folder the script is started.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: where the stamp lives in a notebook's metadata
STAMP_KEY = "flowsolver"


def code_hash(nb) -> str:
    """SHA-256 of the notebook's code cells' sources, in order (outputs and markdown excluded)."""
    digest = hashlib.sha256()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            digest.update(source.encode() + b"\0")
    return digest.hexdigest()


def refresh(path: Path, figures: Path | None = None) -> float:
    """Execute ``path`` in place (kernel cwd: its folder, this checkout first on the path);
    returns the seconds it took."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + env_path if env_path else "")
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)      # no timestamps: a re-run changes only what changed
        # cells added by hand get the id nbformat 4.5 asks for
        cell.setdefault("id", hashlib.sha1(f"{path.name}{nb.cells.index(cell)}".encode()).hexdigest()[:8])
    nb.metadata[STAMP_KEY] = {"code_sha256": code_hash(nb)}
    nbformat.write(nb, path)
    if figures is not None:
        figures.mkdir(parents=True, exist_ok=True)
        for i, cell in enumerate(nb.cells):
            for j, out in enumerate(cell.get("outputs", [])):
                png = out.get("data", {}).get("image/png")
                if png:
                    (figures / f"{path.stem}_cell{i}_{j}.png").write_bytes(base64.b64decode(png))
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--figures", type=Path, help="folder to write each figure (PNG) into")
    args = parser.parse_args(argv)
    paths = [p if p.exists() else ROOT / "notebooks" / p.name for p in args.notebooks]   # a bare name: in notebooks/
    paths = paths or sorted((ROOT / "notebooks").glob("*.ipynb"))
    total = 0.0
    for path in paths:
        seconds = refresh(path.resolve(), args.figures)
        total += seconds
        print(f"{path.name}: {seconds:.1f} s, {path.stat().st_size / 1e3:.0f} kB", flush=True)
    print(f"total: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
