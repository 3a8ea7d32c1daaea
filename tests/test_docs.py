"""The documentation site's Python examples run as written (each page's blocks in order, in one
namespace, in a temporary folder). A block after ``<!-- docs-test: skip (reason) -->`` is
left out; the reason says why (a file of the user's own)."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"(<!-- docs-test: skip \(([^)]*)\) -->\s*)?```python\n(.*?)```", re.S)
# pages whose examples take more than a few seconds on a 2-core CPU (an 8 GiB all-reduce, a 64-GPU
# 70B step, a trace written and replayed)
_SLOW = {"guide/collectives.md", "guide/training.md", "guide/traces.md"}


def _pages():
    pages = []
    for path in sorted(DOCS.rglob("*.md")):
        name = path.relative_to(DOCS).as_posix()
        if "```python" in path.read_text():
            marks = [pytest.mark.slow] if name in _SLOW else []
            pages.append(pytest.param(name, marks=marks, id=name))
    return pages


def _blocks(name):
    return [(code, skip) for skip_tag, skip, code in _BLOCK.findall((DOCS / name).read_text())]


def test_pages_with_examples_are_found():
    names = {p.values[0] for p in _pages()}
    assert {"index.md", "concepts.md", "guide/collectives.md", "guide/sweeps.md"} <= names


@pytest.mark.parametrize("name", _pages())
def test_python_examples_run(name, tmp_path, monkeypatch, capsys):
    if name in {"guide/sweeps.md", "guide/sensitivities.md", "guide/calibration.md"}:
        pytest.importorskip("pandas")
    if name == "guide/traces.md":
        pytest.importorskip("google.protobuf")
    if name == "api/plot.md":
        pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    # a page that registers a part (design.md's "Your own parts") changes the process's catalogue
    # for good, and the bill's own choice of switch then takes it: give each page its own copy
    from topologies import parts
    monkeypatch.setattr(parts, "_PARTS", dict(parts._PARTS))
    monkeypatch.setattr(parts, "_RATE_PART", {})
    namespace = {"__name__": "__docs__"}
    ran = 0
    for i, (code, skip) in enumerate(_blocks(name)):
        if skip:
            continue
        exec(compile(code, f"docs/{name} block {i + 1}", "exec"), namespace)
        ran += 1
    assert ran, f"docs/{name}: every example is skipped"
    capsys.readouterr()
