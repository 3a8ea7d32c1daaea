"""Public names that load their module on first use (PEP 562), so that ``import flowsolver``,
``flowsolver --help`` and the command line's small commands start without importing JAX, SciPy
or a whole subpackage they do not need.

A package lists, per private module, the names it re-exports; :func:`lazy_exports` returns the
package's ``__getattr__`` and ``__dir__``. A name resolves by importing its module (a name equal
to the module's own name is the module itself) and is then kept in the package, so each
resolves once. An attribute that is no listed name but a submodule of the package
(``flowsolver.routing``) is imported as ``import flowsolver.routing`` would.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys


def lazy_exports(package: str, table: dict[str, tuple[str, ...]]):
    """``(__getattr__, __dir__)`` for ``package`` whose public names are ``table``'s:
    ``{".module": ("name", ...)}``; a name equal to the module's last part is the module.

    Examples
    --------
    >>> getattr_, dir_ = lazy_exports("flowsolver", {"._status": ("Status",)})
    >>> getattr_("Status").__name__, "Status" in dir_()
    ('Status', True)
    """
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str):
        home = sys.modules[package]
        module = where.get(name)
        if module is not None:
            loaded = importlib.import_module(module, package)
            value = loaded if module.rpartition(".")[2] == name else getattr(loaded, name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(home, name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
