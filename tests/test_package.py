"""The package's shape: the public surface is complete and holds no internals, and data
flows one way (no module imports one that imports it; a lower layer never imports a
higher one)."""

import ast
import importlib
from pathlib import Path

import pytest

import flowsolver as fs

ROOT = Path(fs.__file__).resolve().parent.parent

#: the layers, lowest first; a module may import its own layer or lower ones only
LAYERS = [
    ("topologies",),
    ("flowsolver._status", "flowsolver._checks", "flowsolver._version", "flowsolver._lazy", "flowsolver._tolerance",
     "flowsolver.nccl_tests", "flowsolver._nccl_log", "flowsolver._nccl_rows", "flowsolver._nccl_env"),
    ("flowsolver.traffic",),
    ("flowsolver.routing",),
    ("flowsolver.solver",),
    ("flowsolver.timing",),
    ("flowsolver.collectives",),
    ("flowsolver.training",),
    ("flowsolver.traces",),
    ("flowsolver._sweep", "flowsolver._sweep_files", "flowsolver._sweep_grid", "flowsolver._sweep_table", "flowsolver.study",
     "flowsolver.plot",
     "flowsolver.upgrade", "flowsolver._design", "flowsolver._design_candidate", "flowsolver._design_fabrics", "flowsolver._design_workload", "flowsolver.reliability", "flowsolver.serving", "flowsolver.planning"),
    ("flowsolver.cli", "flowsolver.__main__"),
    ("flowsolver",),
]


def _modules():
    for pkg in ("flowsolver", "topologies"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            yield ".".join(parts), is_pkg, path


def _imports():
    """module -> the project modules it imports (at module level or inside functions)."""
    names = {m for m, _, _ in _modules()}
    out = {}
    for module, is_pkg, path in _modules():
        package = module if is_pkg else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # "from .x import y": y may be a module of x, or a name x defines
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in names else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in names:
                    t = t.rpartition(".")[0]
                if t and t != module:
                    found.add(t)
        out[module] = found
    return out


def _layer(module):
    best = None
    for i, group in enumerate(LAYERS):
        for unit in group:
            if module == unit or module.startswith(unit + "."):
                if best is None or len(unit) > len(best[1]):
                    best = (i, unit)
    assert best is not None, f"{module} is in no layer of tests/test_package.py"
    return best


def test_no_module_imports_a_module_that_imports_it():
    graph = _imports()
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for n in graph.get(m, ()):
            if state.get(n) == "open":
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if n not in state:
                visit(n, stack + [n])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_lower_layers_never_import_higher_ones():
    bad = []
    for module, targets in _imports().items():
        mine, unit = _layer(module)
        for t in targets:
            theirs, other = _layer(t)
            if theirs > mine:
                bad.append(f"{module} ({unit}) imports {t} ({other})")
    assert not bad, "\n".join(bad)


def test_no_module_imports_another_package_s_private_module():
    """A package's private module (``flowsolver.training._step``, ``topologies._graph``) is
    imported only from inside that package (or a package within it); other packages import
    the names from the package (``from ..training import prepare_step``)."""
    bad = []
    for module, targets in _imports().items():
        for t in targets:
            parts = t.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
            if not private:
                continue
            owner = ".".join(parts[:private[0]])
            if module != owner and not module.startswith(owner + "."):
                bad.append(f"{module} imports {t} (private to {owner})")
    assert not bad, "\n".join(sorted(bad))


def test_the_public_surface_is_complete_and_holds_no_internals():
    for name in fs.__all__:
        assert hasattr(fs, name), name
    assert not [n for n in fs.__all__ if n.startswith("_") and n != "__version__"]
    # what users reach for without knowing where it lives
    for name in ("trace_count", "memory_per_gpu", "busbw_factor", "PROTOCOLS", "Status", "Bottleneck",
                 "expand_grid", "default_cache_dir", "read_chakra", "replay", "write_chakra", "NCCL_ALGORITHMS",
                 "nccl_tests"):
        assert name in fs.__all__, name


def test_flowsolver_sweep_is_the_function_and_no_module_shadows_it():
    assert callable(fs.sweep) and fs.sweep.__module__ == "flowsolver._sweep"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("flowsolver.sweep")


def test_the_version_is_pyproject_s():
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        assert tomllib.load(fh)["project"]["version"] == fs.__version__


def test_the_topologies_surface_is_complete_and_holds_no_jax():
    import topologies as tp

    for name in tp.__all__:
        assert hasattr(tp, name), name
    assert not [n for n in tp.__all__ if n.startswith("_")]
    # the readers of other tools' machine descriptions
    for name in ("from_nccl_xml", "NcclServer", "from_astra_network", "from_simai", "to_simai"):
        assert name in tp.__all__, name
    jax = []
    for path in sorted((ROOT / "topologies").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            jax += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("jax", "jaxlib")]
    assert not jax, jax


def test_import_and_help_start_without_jax_or_scipy():
    """`import flowsolver` and `flowsolver --help` load neither JAX nor SciPy (public names load
    their module on first use: flowsolver._lazy); the first use of a solver name does."""
    import subprocess
    import sys

    code = ("import sys, contextlib, io\n"
            "import flowsolver, flowsolver.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()): flowsolver.cli.main(['--help'])\n"
            "print(sorted(m for m in ('jax', 'scipy', 'pandas', 'matplotlib') if m in sys.modules))\n"
            "flowsolver.max_min_fair\n"
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout


def test_every_lazy_name_is_the_object_its_type_checking_import_names():
    """flowsolver, collectives and training load their names lazily from a table and repeat
    the imports under ``if TYPE_CHECKING``: both give the same object for every name."""
    for package in ("flowsolver", "flowsolver.collectives", "flowsolver.training"):
        pkg = importlib.import_module(package)
        path = Path(pkg.__file__)
        declared = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                for imp in node.body:
                    base = importlib.import_module(("." * imp.level) + (imp.module or ""), package) \
                        if imp.module else pkg
                    for alias in imp.names:
                        declared[alias.name] = (getattr(base, alias.name) if imp.module
                                                else importlib.import_module(f".{alias.name}", package))
        assert declared, package
        public = set(pkg.__all__) - {"__version__"}
        assert public <= set(declared), sorted(public - set(declared))
        for name, value in declared.items():
            assert getattr(pkg, name) is value, (package, name)


def test_the_tests_mirror_the_packages():
    """Each sub-folder of tests/ is named after a package of flowsolver (or topologies) and
    holds only test modules and its ``__init__.py``."""
    here = Path(__file__).resolve().parent
    packages = {p.name for p in (ROOT / "flowsolver").iterdir() if (p / "__init__.py").exists()}
    packages |= {"topologies"}
    folders = [p for p in here.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert folders, here
    for folder in folders:
        assert folder.name in packages, f"tests/{folder.name}/ names no package of flowsolver or topologies"
        assert (folder / "__init__.py").exists(), folder
        stray = [p.name for p in folder.glob("*.py") if p.name != "__init__.py" and not p.name.startswith("test_")]
        assert not stray, (folder.name, stray)
