"""What to upgrade: exact re-solves of discrete network changes beside the linear estimate
from the sensitivities, and a greedy upgrade plan under a budget.

A *workload* is what is timed on a graph: a dict of :func:`~flowsolver.collective`'s
arguments (with ``op``), a dict of :func:`~flowsolver.training_step`'s (with ``model``), or a
callable ``graph -> CollectiveResult | StepResult``. An *upgrade* is an :class:`Upgrade`: the
links it changes (a tier, a technology, a ``"tier/tech"`` cable group or a predicate on
``(u, v, data)``) and how (a capacity ``factor``, or a new link ``tech`` from the catalogue,
``cables`` times per link as before), or any ``apply(graph) -> graph`` (adding spines, a
rail): those have no linear estimate.

Priced upgrades: :func:`upgrade_cost` is the change of the network bill
(:func:`topologies.bill`, USD) that an upgrade makes: a new link technology re-chooses the
switches, NICs and optics of the links it touches (one that would leave a switch speaking two
families, such as RoCE NIC links on InfiniBand leaves, is refused); a capacity ``factor`` is bought as
``ceil(factor)`` times the cables (with their transceivers and switch ports) on the selected
links, a switch whose ports run out split into more switches of its model (as the generators
build the wider fabric: a full tier doubled is twice its switches, not bigger boxes).
``upgrade_plan(..., cost="bill")`` uses it and reports the time saved per USD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import math
import numbers

import numpy as np

import topologies as tp

from .collectives import CollectiveResult, collective
from .training import StepResult, step_arguments, training_step

__all__ = ["Upgrade", "what_if", "upgrade_plan", "tier_upgrades", "upgrade_cost"]


@dataclass(frozen=True)
class Upgrade:
    """A change to a cluster graph (see the module docstring).

    >>> u = Upgrade("agg-core", factor=2.0)
    >>> g = u.apply(tp.fat_tree(4))
    >>> sorted({d["capacity"] / 1e9 for *_, d in g.edges(data=True) if d["tier"] == "agg-core"})
    [100.0]
    """

    links: object = None                 # str (tier, tech or "tier/tech") or callable(u, v, data) -> bool
    factor: float | None = None
    tech: str | None = None
    transform: Callable | None = None    # graph -> graph, for structural changes

    def __post_init__(self):
        given = sum(x is not None for x in (self.factor, self.tech, self.transform))
        if given != 1:
            raise ValueError("Upgrade: give exactly one of factor=, tech= or transform=")
        if self.transform is None and self.links is None:
            raise ValueError("Upgrade: links= (a tier, tech, 'tier/tech' or a predicate) is required")
        if self.factor is not None and (isinstance(self.factor, (bool, np.bool_))
                                        or not (np.isfinite(self.factor) and self.factor > 0)):
            raise ValueError(f"Upgrade: factor must be a finite number > 0, got {self.factor!r}")
        if self.tech is not None:
            tp.get_link(self.tech)          # raises naming the known techs

    def selects(self, u, v, data) -> bool:
        sel = self.links
        if callable(sel):
            return bool(sel(u, v, data))
        return sel in (data.get("tier"), data.get("tech"), f"{data.get('tier')}/{data.get('tech')}")

    def apply(self, graph):
        """A changed copy of ``graph``."""
        if self.transform is not None:
            return self.transform(graph.copy())
        g = graph.copy()
        hit = 0
        for u, v, d in g.edges(data=True):
            if not self.selects(u, v, d):
                continue
            hit += 1
            if self.factor is not None:
                d["capacity"] = float(d["capacity"] * self.factor)
            else:
                tech = tp.get_link(self.tech)
                # what the link carries per unit of its technology's rate (its cables, a factor
                # bought before, a degradation) carries over: a doubled 400G link made XDR is
                # two XDR cables' worth, not one
                old = d.get("tech")
                per_rate = (d["capacity"] / tp.get_link(old).bandwidth if old in tp.link_names()
                            else d.get("cables", 1))
                d.update(capacity=float(tech.bandwidth * per_rate), latency=float(tech.latency), tech=tech.name)
                # the old technology's own efficiency and NIC transport go with it (an EFA link
                # made NDR kept EFA's plugin latency): the new one's, as the generators set them
                for key, value in (("efficiency", tech.efficiency), ("transport", tech.transport)):
                    if value is None:
                        d.pop(key, None)
                    else:
                        d[key] = float(value) if key == "efficiency" else value
        if not hit:
            raise ValueError(f"Upgrade: links={self.links!r} selects no link of the graph")
        if self.tech is not None:
            self._one_family(graph, g)
        return g

    def _one_family(self, before, after):
        """Refuse a technology that leaves a switch speaking two families (RoCE access links on
        InfiniBand leaves): a switch is one family's box; a switch mixed before is not blamed."""
        def family(d):
            fam = tp.get_link(d["tech"]).family if d.get("tech") in tp.link_names() else None
            return "ethernet" if fam == "roce" else fam

        for sw, d in after.nodes(data=True):
            if d.get("kind") != "switch":
                continue
            now = {family(e) for e in after[sw].values() if e.get("tier") not in tp.SERVER_TIERS} - {None}
            was = {family(e) for e in before[sw].values() if e.get("tier") not in tp.SERVER_TIERS} - {None}
            if len(now) > 1 and len(was) == 1:
                raise ValueError(f"{self!r}: switch {sw!r} would carry {' and '.join(sorted(now))} links; "
                                 "a switch speaks one family: upgrade every tier it joins to the same family")


def tier_upgrades(graph, factor: float = 2.0) -> dict:
    """One :class:`Upgrade` per tier of ``graph``: its capacity times ``factor``.

    >>> sorted(tier_upgrades(tp.fat_tree(4)))
    ['access', 'agg-core', 'edge-agg', 'pcie']
    """
    return {t: Upgrade(t, factor=factor) for t in sorted({d["tier"] for *_, d in graph.edges(data=True)})}


def _as_bought(graph, upgrade: Upgrade):
    """The graph the bill sees after ``upgrade``: a capacity factor as ``ceil(factor)`` times
    the cables of the selected links; a technology or a transform as applied."""
    if upgrade.factor is None:
        return upgrade.apply(graph)
    g = graph.copy()
    k = math.ceil(upgrade.factor - 1e-12)
    hit = 0
    for u, v, d in g.edges(data=True):
        if upgrade.selects(u, v, d):
            hit += 1
            d["cables"] = int(d.get("cables", 1)) * k
            d["capacity"] = float(d["capacity"] * k)
    if not hit:
        raise ValueError(f"Upgrade: links={upgrade.links!r} selects no link of the graph")
    return _more_switches(graph, g, upgrade.factor)


def _switch_use(g) -> dict:
    """switch -> (family, rate of its fastest cable, ports in use) in the compute fabric, as
    :func:`topologies.bill` counts them (one port per cable); None where a cable's technology
    is not in the catalogue."""
    use = {}
    for sw, d in g.nodes(data=True):
        if d.get("kind") != "switch" or "network" in d:
            continue
        family, rate, ports = None, 0.0, 0
        for v, e in g[sw].items():
            if e.get("tier") in tp.SERVER_TIERS or "network" in g.nodes[v]:
                continue
            if e.get("tech") not in tp.link_names():
                family = None
                break
            tech = tp.get_link(e["tech"])
            family = family or tech.family
            rate, ports = max(rate, tech.bandwidth), ports + int(e.get("cables", 1))
        use[sw] = (family, rate, ports) if family else None
    return use


#: links the split switches may hold at most, each clone joined to every fabric neighbour both ways
#: (:func:`_more_switches`: an upper bound, a clone with no share of a cable gets no link)
MAX_BOUGHT_EDGES = 1_000_000


def _spread(load: list, n: int) -> list:
    """``n`` cables dealt one at a time to the least loaded of ``load``'s switches (the lowest
    index among equals), ``load`` updated: each switch's share. :func:`_more_switches` deals only
    this way, so the loads stay within one of each other and the deal is the least loaded in
    index order, then whole rounds, then the first of the rest: O(switches), not O(cables x
    switches)."""
    k, low = len(load), min(load)
    assert max(load) - low <= 1, load
    first = [i for i in range(k) if load[i] == low][:n]
    rounds, extra = divmod(n - len(first), k)
    share = [rounds + (i < extra) for i in range(k)]
    for i in first:
        share[i] += 1
    for i in range(k):
        load[i] += share[i]
    return share


def _more_switches(before, g, factor):
    """``g`` (``before`` with more cables) with each switch whose ports outgrow its box split
    into ``ceil(ports / box ports)`` switches of that box, its cables spread evenly over them:
    more cables on a full tier add switches of the same model, as the generators build the
    wider fabric (a 2:1 leaf-spine's two full 64-port spines doubled are four QM9700 spines,
    not two 144-port boxes of the next family)."""
    from topologies.parts import _switch_part      # the box the bill chose before

    old = _switch_use(before)
    splits = {}
    for sw, now in _switch_use(g).items():
        was = old.get(sw)
        if now is None or was is None or now[2] <= was[2]:
            continue
        k = math.ceil(now[2] / _switch_part(was[0], was[1], was[2]).ports)
        if k >= 2:
            splits[sw] = k
    # every split switch holds an edge each way to each neighbour: refuse before building what
    # memory cannot (adv25 F4: factor 1e5 on a 4-server fabric ran past 100 s and growing)
    edges = sum(2 * k * sum(1 for v, e in g[sw].items() if e.get("tier") not in tp.SERVER_TIERS
                            and "network" not in g.nodes[v]) for sw, k in splits.items())
    if edges > MAX_BOUGHT_EDGES:
        raise ValueError(f"Upgrade: factor {factor:g} buys the tier as {max(splits.values()):,} switches where one "
                         f"stood, about {edges:,} links, more than flowsolver.upgrade.MAX_BOUGHT_EDGES = "
                         f"{MAX_BOUGHT_EDGES:,}: give a factor the catalogue's boxes can carry")
    for sw, k in splits.items():
        clones, i = [sw], 0
        while len(clones) < k:          # new names (a second doubling splits spine0 beside spine0+1)
            i += 1
            name = f"{sw}+{i}" if isinstance(sw, str) else (sw, i)
            if name not in g:
                clones.append(name)
        g.add_nodes_from((c, dict(g.nodes[sw])) for c in clones[1:])
        load = [0] * k
        for v, e in sorted(g[sw].items(), key=lambda x: -int(x[1].get("cables", 1))):
            n, e = int(e.get("cables", 1)), dict(e)
            if e.get("tier") in tp.SERVER_TIERS or "network" in g.nodes[v]:
                continue
            share = _spread(load, n)
            back = dict(g.edges[v, sw]) if g.has_edge(v, sw) else None
            for i, (c, m) in enumerate(zip(clones, share)):
                if not m:
                    continue
                for a, b, d in ((c, v, e), (v, c, back)):
                    if d is not None:
                        g.add_edge(a, b, **dict(d, cables=m, capacity=float(d["capacity"]) * m / n))
            if not share[0]:
                g.remove_edge(sw, v)
                if back is not None:
                    g.remove_edge(v, sw)
    return g


def upgrade_cost(graph, upgrade: Upgrade, *, prices: dict | None = None, optics: str = "multimode") -> float:
    """USD the network bill of ``graph`` grows by with ``upgrade`` (:func:`topologies.bill`
    before and after; see the module docstring). Links inside servers (NVLink, PCIe) are not
    on the bill: upgrading them costs 0 here.

    Doubling the NIC links of 8 DGX H100 (64 NICs): each NIC becomes an 800G one, each gets a
    second fibre, and the second 400G port takes half a twin-port module at each end:

    >>> g = tp.rail_optimized(8)
    >>> nic = tp.get_part("connectx8_800g").price - tp.get_part("connectx7_400g").price
    >>> fib, twin = tp.get_part("fiber_mpo").price, tp.get_part("osfp_800g_twin").price
    >>> upgrade_cost(g, Upgrade("access", factor=2.0)) == 64 * (nic + fib + twin)
    True
    """
    if not isinstance(upgrade, Upgrade):
        raise TypeError(f"upgrade must be an Upgrade, got {type(upgrade).__name__}")
    before = tp.bill(graph, prices=prices, optics=optics).price
    after = _as_bought(graph, upgrade)
    try:
        return float(tp.bill(after, prices=prices, optics=optics).price - before)
    except ValueError as err:       # a part the catalogue has not (a 1600G NIC): name the upgrade
        raise UnpricedUpgrade(f"upgrade_cost: the parts catalogue cannot price {upgrade!r}: {err}") from err


class UnpricedUpgrade(ValueError):
    """An upgrade whose bill needs a part the catalogue has not (register it with
    :func:`topologies.register_part`); :func:`upgrade_plan` leaves such upgrades out."""


def _run(workload, graph):
    if callable(workload):
        out = workload(graph)
    elif isinstance(workload, dict) and "op" in workload:
        out = collective(graph, **workload)
    elif isinstance(workload, dict) and "model" in workload:
        out = training_step(graph, **step_arguments(**workload))
    else:
        raise TypeError("workload must be a dict of collective() arguments (with 'op'), of training_step() "
                        f"arguments (with 'model'), or a callable graph -> result; got {type(workload).__name__}")
    if not isinstance(out, (CollectiveResult, StepResult)):
        raise TypeError(f"workload must give a CollectiveResult or StepResult, got {type(out).__name__}")
    return out


def _time(result) -> float:
    return float(result.step_time if isinstance(result, StepResult) else result.time)


def _linear(result, graph, upgraded) -> float:
    """The linear estimate of the new time: time + the one-sided derivative along the change."""
    before = np.array([d["capacity"] for *_, d in graph.edges(data=True)])
    if set(upgraded.edges) != set(graph.edges):
        return float("nan")                        # structural change: no derivative says it
    after = np.array([upgraded.edges[u, v]["capacity"] for u, v in graph.edges])
    dc = after - before
    try:
        if isinstance(result, StepResult):
            from .training import compose, step_directional

            return _time(result) + step_directional(result, compose, dc)
        return _time(result) + result.time_directional(dc)
    except ValueError:              # no derivative says it (a tie between NCCL's choices): no estimate
        return float("nan")


def what_if(graph, workload, upgrades: dict):
    """Time ``workload`` on ``graph`` and after each upgrade (an exact re-solve), beside the
    linear estimate from the sensitivities. Returns a pandas DataFrame (needs pandas), one
    row per upgrade: ``time_s`` before, ``exact_s`` and ``linear_s`` after, ``saved_s``
    (exact) and ``saved_percent``.

    Examples
    --------
    >>> df = what_if(tp.fat_tree(4), dict(op="all_to_all", size=2**24), tier_upgrades(tp.fat_tree(4)))
    >>> df.sort_values("saved_s").iloc[-1]["upgrade"]     # the NICs hold a non-blocking fat-tree
    'access'
    """
    import pandas as pd

    if not isinstance(upgrades, dict) or not upgrades:
        raise ValueError("upgrades must be a non-empty dict: name -> Upgrade")
    base = _run(workload, graph)
    t0 = _time(base)
    rows = []
    for name, up in upgrades.items():
        if not isinstance(up, Upgrade):
            raise TypeError(f"upgrades[{name!r}] must be an Upgrade, got {type(up).__name__}")
        g = up.apply(graph)
        exact = _time(_run(workload, g))
        rows.append(dict(upgrade=name, time_s=t0, exact_s=exact, linear_s=_linear(base, graph, g),
                         saved_s=t0 - exact, saved_percent=(t0 - exact) / t0 * 100.0))
    return pd.DataFrame(rows)


def upgrade_plan(graph, workload, budget: float, cost="bill", upgrades: dict | None = None, *,
                 repeat: bool = False, prices: dict | None = None, optics: str = "multimode"):
    """Pick upgrades greedily by exact time saved per unit cost, re-solving after each pick,
    until the budget is spent or nothing left saves time.

    ``cost``: ``"bill"`` (default: :func:`upgrade_cost`, USD from the parts catalogue with
    ``prices`` overriding it; upgrades the bill does not see, inside the servers, are left
    out), a dict name -> cost, or a callable ``(name, Upgrade, graph) -> cost`` (any unit, the
    same as ``budget``; > 0). ``upgrades``: default :func:`tier_upgrades` (each tier
    doubled). ``repeat``: an upgrade may be picked again. Returns a pandas DataFrame, one row
    per pick in order: ``upgrade``, ``cost``, ``time_s`` after it, ``saved_s`` (by this
    pick), ``saved_per_cost`` (s per unit cost: per USD with the bill), ``spent``. With the
    bill, an upgrade that needs a part the catalogue has not (NICs doubled past 800G) is left
    out, not an error: ``plan.attrs["unpriced"]`` maps its name to why.

    >>> g = tp.fat_tree(4)
    >>> plan = upgrade_plan(g, dict(op="all_to_all", size=2**24), budget=1.0, cost=lambda *a: 1.0)
    >>> plan["upgrade"].tolist()
    ['access']
    """
    import pandas as pd

    # before the bill and the first timing; None, a string or an array reached np.isfinite's TypeError
    if (isinstance(budget, (bool, np.bool_)) or not isinstance(budget, numbers.Real)
            or not (math.isfinite(budget) and budget >= 0)):
        raise ValueError(f"budget must be a finite number >= 0 (in the unit of cost: USD with cost='bill'), "
                         f"got {budget!r}")
    upgrades = tier_upgrades(graph) if upgrades is None else dict(upgrades)
    bought, unpriced = None, {}         # name -> why the catalogue cannot price it (left out)
    if isinstance(cost, str):
        if cost != "bill":
            raise ValueError(f"cost must be 'bill', a dict name -> cost or a callable, got {cost!r}")
        billed = {}
        for name, up in upgrades.items():
            try:
                billed[name] = upgrade_cost(graph, up, prices=prices, optics=optics)
            except UnpricedUpgrade as err:
                unpriced[name] = str(err)
        upgrades = {n: u for n, u in upgrades.items() if billed.get(n, 0) > 0}
        # the bill reads the graph as bought (a factor's cables bought: doubling a doubled link
        # buys two more cables, not one), which the timed graph does not record
        bought = {"graph": graph}

        def cost(name, up, g):
            return billed[name] if g is graph else upgrade_cost(bought["graph"], up, prices=prices, optics=optics)
    if isinstance(cost, dict) and (missing := sorted(set(upgrades) - set(cost))):
        raise ValueError(f"cost has no entry for the upgrades {missing}")
    price = (lambda n, u, g: cost[n]) if isinstance(cost, dict) else cost
    if not callable(price):
        raise TypeError("cost must be a dict name -> cost or a callable (name, upgrade, graph) -> cost")
    current, now = graph, _time(_run(workload, graph))
    spent, rows, left = 0.0, [], dict(upgrades)
    while left:
        best = None
        for name, up in list(left.items()):
            try:
                c = float(price(name, up, current))
            except UnpricedUpgrade as err:      # the bill's own: bought again it needs a part not there
                if bought is None:
                    raise
                unpriced[name] = str(err)
                left.pop(name)
                continue
            if not c > 0:
                raise ValueError(f"cost of {name!r} must be > 0, got {c!r}")
            if spent + c > budget * (1 + 1e-12):
                continue
            g = up.apply(current)
            t = _time(_run(workload, g))
            if now - t > 1e-12 * now and (best is None or (now - t) / c > best[0]):
                best = ((now - t) / c, name, c, g, t)
        if best is None:
            break
        _, name, c, current, t = best
        if bought is not None:
            bought["graph"] = _as_bought(bought["graph"], upgrades[name])
        spent += c
        rows.append(dict(upgrade=name, cost=c, time_s=t, saved_s=now - t, saved_per_cost=(now - t) / c, spent=spent))
        now = t
        if not repeat:
            left.pop(name)
    plan = pd.DataFrame(rows, columns=["upgrade", "cost", "time_s", "saved_s", "saved_per_cost", "spent"])
    plan.attrs["unpriced"] = unpriced
    return plan
