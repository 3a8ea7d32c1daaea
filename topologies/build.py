"""One entry point from a family name and its parameters to a cluster graph (what the
command line and sweeps describe as text)."""

from __future__ import annotations

from .clos import fat_tree, leaf_spine, rail_optimized
from .dragonfly import dragonfly
from .failures import fail_links
from .rail_only import rail_only
from .torus import torus

__all__ = ["FAMILIES", "build"]

#: family -> its size parameters (required unless marked optional below)
FAMILIES = {
    "rail_optimized": ("nodes",), "fat_tree": ("k",), "leaf_spine": ("leaves", "spines", "hosts_per_leaf"),
    "dragonfly": ("p", "a", "h", "g"), "torus": ("dims", "wrap"), "rail_only": ("nodes",),
}
_OPTIONAL = ("g", "wrap")


def build(family: str, *, link="ib_ndr", server=None, oversubscription: float = 1.0, fail_fraction: float = 0.0,
          seed: int = 0, **size):
    """The cluster of ``family`` with its size parameters (``FAMILIES``), fabric ``link``,
    ``server`` (rail_optimized defaults to ``dgx_h100``), ``oversubscription`` (rail_optimized,
    leaf_spine) and ``fail_fraction`` of its switch cables failed with ``seed``.

    >>> g = build("torus", dims=[2, 2], fail_fraction=0.0)
    >>> g.graph["generator"], g.number_of_nodes()
    ('torus', 4)
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    kw = {k: size[k] for k in FAMILIES[family] if size.get(k) is not None}
    missing = [k for k in FAMILIES[family] if k not in kw and k not in _OPTIONAL]
    if missing:
        raise ValueError(f"family {family!r} needs parameter(s) {missing}")
    if family == "rail_optimized":
        g = rail_optimized(kw["nodes"], server=server or "dgx_h100", link=link, oversubscription=oversubscription)
    elif family == "rail_only":
        g = rail_only(kw["nodes"], server=server or "dgx_h100", link=link)
    elif family == "fat_tree":
        g = fat_tree(kw["k"], link=link, server=server)
    elif family == "leaf_spine":
        g = leaf_spine(kw["leaves"], kw["spines"], kw["hosts_per_leaf"], link=link,
                       oversubscription=oversubscription, server=server)
    elif family == "dragonfly":
        g = dragonfly(kw["p"], kw["a"], kw["h"], g=kw.get("g"), link_local=link, link_global=link, server=server)
    else:
        g = torus(tuple(kw["dims"]), link=link, wrap=kw.get("wrap", True), server=server)
    if fail_fraction:
        g = fail_links(g, fail_fraction, seed=int(seed))
    return g
