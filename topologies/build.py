"""One entry point from a family name and its parameters to a cluster graph (what the
command line and sweeps describe as text), and the registry of families behind it.

A family is a generator plus one :func:`register_family` call naming its size parameters
(:class:`FamilyParameter`: type, command-line default and help); :func:`build`, the command
line's ``--family`` and its size flags, the sweeps and the study read the registry.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

from .clos import fat_tree, leaf_spine, rail_optimized
from .dragonfly import dragonfly
from .failures import checked_failures, fail_links
from .rail_only import rail_only
from .torus import torus

__all__ = ["FAMILIES", "build", "Family", "FamilyParameter", "register_family", "get_family"]

#: the keywords :func:`build` hands a family's builder when its signature takes them
_COMMON = ("link", "server", "oversubscription")


@dataclass(frozen=True)
class FamilyParameter:
    """One size parameter of a topology family, as :func:`build` takes it (``name=``) and the
    command line shows it (``--name``, or ``flag``).

    ``type`` converts a command-line value (``int``, ``float``, ``str``; ``bool``: a flag
    without a value, ``flag``, that sets the parameter to ``not default``); ``default`` is the
    command line's default (:func:`build` itself needs every parameter that is not
    ``optional``); ``nargs`` as argparse's (``"+"``: a list); ``help`` is the flag's help text
    (``%(default)s`` allowed).

    >>> FamilyParameter("nodes", int, 8, "servers").flag
    '--nodes'
    """

    name: str
    type: type = int
    default: object = None
    help: str = ""
    optional: bool = False
    nargs: str | None = None
    flag: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be a Python identifier (the keyword build() takes), got {self.name!r}")
        if self.type not in (int, float, str, bool):
            raise ValueError(f"type must be int, float, str or bool, got {self.type!r}")
        if self.type is bool and self.flag is None:
            raise ValueError(f"parameter {self.name!r}: a bool parameter needs flag= (the command-line switch "
                             "that sets it to the opposite of its default)")
        if self.flag is None:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        if not (isinstance(self.flag, str) and self.flag.startswith("--") and len(self.flag) > 2):
            raise ValueError(f"flag must be a long option such as '--{self.name}', got {self.flag!r}")

    @property
    def dest(self) -> str:
        """The attribute the parsed command line holds the flag's value in."""
        return self.flag[2:].replace("-", "_")

    def from_cli(self, value):
        """The value :func:`build` takes, from the parsed flag's ``value``."""
        if self.type is bool:
            return (not self.default) if value else self.default
        return value


@dataclass(frozen=True)
class Family:
    """A registered topology family: its ``name``, its ``builder`` (the size parameters as
    keywords, plus ``link``, ``server`` and ``oversubscription`` where its signature takes
    them; returns the graph) and its size ``parameters`` (:class:`FamilyParameter`)."""

    name: str
    builder: Callable
    parameters: tuple

    @property
    def parameter_names(self) -> tuple:
        """The size parameters' names, in order (``FAMILIES[name]``)."""
        return tuple(p.name for p in self.parameters)

    def takes(self, keyword: str) -> bool:
        """Whether :func:`build` hands this family ``keyword`` (``link``, ``server``,
        ``oversubscription``): whether its builder's signature takes it.

        >>> get_family("rail_optimized").takes("oversubscription"), get_family("fat_tree").takes("oversubscription")
        (True, False)
        """
        return _takes(self.builder, keyword)


_REGISTRY: dict = {}


class _FamilyView(Mapping):
    """The registered families, read-only and always current: iterating gives their names in
    registration order, ``FAMILIES[name]`` the names of its size parameters."""

    def __getitem__(self, name):
        return _REGISTRY[name].parameter_names

    def __iter__(self):
        return iter(_REGISTRY)

    def __len__(self):
        return len(_REGISTRY)

    def __repr__(self):
        return repr(dict(self))


#: family -> its size parameters (required unless marked optional); read-only, from the registry
FAMILIES = _FamilyView()


def register_family(name: str, builder: Callable, parameters=(), *, overwrite: bool = False) -> Family:
    """Register topology family ``name``: ``builder(**size, link=, server=, oversubscription=)``
    returns its graph (only the keywords its signature takes are passed), ``parameters`` its
    size parameters (:class:`FamilyParameter`, in command-line order). Then :func:`build`,
    :data:`FAMILIES`, sweeps and the command line's ``--family`` know it. A parameter another
    family has too (one command-line flag for both) must be declared the same way. Built-in
    families cannot be replaced; a user family can with ``overwrite=True``.

    >>> from topologies import torus
    >>> f = register_family("doc_ring", lambda n, *, link: torus([n], link=link),
    ...                     [FamilyParameter("n", int, 8, "chips in the ring")], overwrite=True)
    >>> build("doc_ring", n=4).number_of_nodes()
    4
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(builder):
        raise TypeError(f"builder must be callable (the family's generator), got {type(builder).__name__}")
    parameters = tuple(parameters)
    bad = [p for p in parameters if not isinstance(p, FamilyParameter)]
    if bad:
        raise TypeError(f"parameters must be FamilyParameter records, got {bad[0]!r}")
    names = [p.name for p in parameters]
    if len(set(names)) < len(names):
        raise ValueError(f"family {name!r}: parameter names must be distinct, got {names}")
    clash = [p.name for p in parameters if p.name in (*_COMMON, "family", "fail_fraction", "seed")]
    if clash:
        raise ValueError(f"family {name!r}: {clash} are build()'s own keywords, not size parameters")
    if name in _BUILTIN:
        raise ValueError(f"family {name!r} is built in and cannot be replaced; register it under another name")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"family {name!r} is already registered; pass overwrite=True to replace it")
    for p in parameters:
        for other in _REGISTRY.values():
            q = next((q for q in other.parameters if q.name == p.name), None)
            if other.name != name and q is not None and q != p:
                raise ValueError(f"family {name!r}: parameter {p.name!r} is declared differently by family "
                                 f"{other.name!r} ({q}); one command-line flag serves both, declare it the same")
    family = Family(name, builder, parameters)
    _REGISTRY[name] = family
    return family


def get_family(name: str) -> Family:
    """The registered :class:`Family` ``name``.

    >>> get_family("torus").parameter_names
    ('dims', 'wrap')
    """
    if name not in _REGISTRY:
        raise ValueError(f"family must be one of {', '.join(_REGISTRY)}, got {name!r}")
    return _REGISTRY[name]


def build(family: str, *, link="ib_ndr", server=None, oversubscription: float = 1.0, fail_fraction: float = 0.0,
          seed: int = 0, **size):
    """The cluster of ``family`` with its size parameters (``FAMILIES``), fabric ``link``,
    ``server`` (rail_optimized defaults to ``dgx_h100``), ``oversubscription`` (rail_optimized,
    leaf_spine) and ``fail_fraction`` of its switch cables failed with ``seed``.

    >>> g = build("torus", dims=[2, 2], fail_fraction=0.0)
    >>> g.graph["generator"], g.number_of_nodes()
    ('torus', 4)
    """
    fam = get_family(family)
    fail_fraction, seed = checked_failures(fail_fraction, seed, "fail_fraction")      # before building
    names = {p.name for p in fam.parameters}
    if unknown := sorted(k for k, v in size.items() if k not in names and v is not None):
        raise ValueError(f"family {family!r} takes {', '.join(sorted(names)) or 'no size parameters'}, "
                         f"not {', '.join(unknown)} (they were dropped, unseen)")
    if oversubscription != 1.0 and not _takes(fam.builder, "oversubscription"):
        raise ValueError(f"oversubscription: family {family!r} is built non-blocking only, got {oversubscription!r}")
    kw = {p.name: size[p.name] for p in fam.parameters if size.get(p.name) is not None}
    missing = [p.name for p in fam.parameters if p.name not in kw and not p.optional]
    if missing:
        raise ValueError(f"family {family!r} needs parameter(s) {missing}")
    common = dict(link=link, server=server, oversubscription=oversubscription)
    g = fam.builder(**kw, **{k: v for k, v in common.items() if _takes(fam.builder, k)})
    if fail_fraction:
        g = fail_links(g, fail_fraction, seed=seed)
    return g


def _takes(fn, keyword: str) -> bool:
    """Whether ``fn`` accepts ``keyword`` (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):     # a builtin without a signature: hand it everything
        return True
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# the built-in families: each generator with build()'s keywords mapped onto its own
def _rail_optimized(nodes, *, link, server, oversubscription):
    return rail_optimized(nodes, server=server or "dgx_h100", link=link, oversubscription=oversubscription)


def _fat_tree(k, *, link, server):
    return fat_tree(k, link=link, server=server)


def _leaf_spine(leaves, spines, hosts_per_leaf, *, link, server, oversubscription):
    return leaf_spine(leaves, spines, hosts_per_leaf, link=link, oversubscription=oversubscription, server=server)


def _dragonfly(p, a, h, g=None, *, link, server):
    return dragonfly(p, a, h, g=g, link_local=link, link_global=link, server=server)


def _torus(dims, wrap=True, *, link, server):
    return torus(tuple(dims), link=link, wrap=wrap, server=server)


def _rail_only(nodes, *, link, server):
    return rail_only(nodes, server=server or "dgx_h100", link=link)


# registered in the order the command line lists them; a parameter two families share
# (nodes) is one record, so one flag serves both
_NODES = FamilyParameter("nodes", int, 8, "servers (rail_optimized; default %(default)s)")
_BUILTIN: tuple = ()
register_family("rail_optimized", _rail_optimized, [_NODES])
register_family("fat_tree", _fat_tree, [FamilyParameter("k", int, 8, "radix (fat_tree; default %(default)s)")])
register_family("leaf_spine", _leaf_spine, [
    FamilyParameter("leaves", int, 4, "leaf switches (leaf_spine; default %(default)s)"),
    FamilyParameter("spines", int, 2, "spine switches (leaf_spine; default %(default)s)"),
    FamilyParameter("hosts_per_leaf", int, 8, "endpoint (NIC) ports under a leaf: a server with 8 NICs takes 8 "
                    "(leaf_spine; default %(default)s)")])
register_family("dragonfly", _dragonfly, [
    FamilyParameter("p", int, 2, "hosts per router (dragonfly; default %(default)s)"),
    FamilyParameter("a", int, 4, "routers per group (dragonfly; default %(default)s)"),
    FamilyParameter("h", int, 2, "global links per router (dragonfly; default %(default)s)"),
    FamilyParameter("g", int, None, "groups (dragonfly; default a*h+1)", optional=True)])
register_family("torus", _torus, [
    FamilyParameter("dims", int, (4, 4, 4), "torus dimensions (default 4 4 4)", nargs="+"),
    FamilyParameter("wrap", bool, True, "torus without wrap-around", optional=True, flag="--mesh")])
register_family("rail_only", _rail_only, [_NODES])
_BUILTIN = tuple(_REGISTRY)
