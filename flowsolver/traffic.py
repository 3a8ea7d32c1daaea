"""Traffic: who sends how many bytes to whom.

A :class:`Flows` holds parallel arrays. Endpoints are GPU ranks (integers, in the order of
``topologies.gpus(graph)``) or graph node ids (any other value, e.g. ``"storage0"``);
they are checked against a graph when the flows are routed. Sizes are bytes, demands
(rate caps) bytes/s, weights are relative shares of max-min fairness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import _plain, integer

__all__ = ["Flows"]

#: the most flows a pattern builder makes in one call: its five per-flow arrays take 40 bytes a
#: flow (2 x int64 endpoints, 3 x float64), 5.4 GB at this count (an all-to-all over 11,585
#: ranks), before the routing's own arrays; more is refused before anything is allocated (an
#: all-to-all over 200,000 ranks asked numpy for 298 GiB). Build larger sets in parts
#: (:meth:`Flows.concat`) or raise this.
MAX_FLOWS = 2**27


def _check_count(what: str, count: int) -> None:
    if count > MAX_FLOWS:
        raise ValueError(f"{what} makes {count:,} flows, more than flowsolver.traffic.MAX_FLOWS = {MAX_FLOWS:,} "
                         f"(40 bytes a flow before routing: {count * 40 / 1e9:,.0f} GB): build it in parts "
                         "(Flows.concat) or raise MAX_FLOWS")


def _endpoints(name: str, values) -> np.ndarray:
    if not isinstance(values, np.ndarray):
        seq = list(values)
        if any(isinstance(v, str) for v in seq) and not all(isinstance(v, str) for v in seq):
            values = np.empty(len(seq), dtype=object)        # ranks beside node ids: 0 must stay 0, not '0'
            values[:] = seq
        else:
            values = seq
    try:
        arr = np.asarray(values)
    except ValueError:          # ragged ([0, [1, 2]]): numpy cannot make it an array
        arr = None
    if arr is not None and arr.size == 0:
        return np.empty(0, dtype=np.int64)                    # no flows (np.asarray([]) is float)
    if arr is None or arr.ndim != 1:    # node ids that are tuples: one object each, not a row of a 2-D array
        seq = list(values)
        arr = np.empty(len(seq), dtype=object)
        for i, v in enumerate(seq):
            if isinstance(v, (list, np.ndarray, dict, set)):
                raise ValueError(f"{name} must be a flat sequence of GPU ranks (integers) or node ids, got "
                                 f"{name}[{i}] = {v!r} (a {type(v).__name__})")
            arr[i] = v
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "b" or arr.dtype.kind == "f":
        raise ValueError(f"{name} must hold GPU ranks (integers) or node ids, got {arr.dtype} values")
    out = np.empty(len(arr), dtype=object)
    for i, v in enumerate(arr):
        v = v.item() if isinstance(v, np.generic) else v
        out[i] = int(v) if isinstance(v, int) and not isinstance(v, bool) else v
    return out


def _positive_array(name, values, n, *, allow_inf, default):
    if values is None:
        return np.full(n, default, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have one entry per flow ({n}), got shape {arr.shape}")
    bad = ~(arr > 0) | (~np.isfinite(arr) if not allow_inf else np.isnan(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        allowed = "a number > 0 (inf for no cap)" if allow_inf else "a finite number > 0"
        raise ValueError(f"{name}[{i}] must be {allowed}, got {arr[i].item()!r}")
    return arr


@dataclass(frozen=True, eq=False)
class Flows:
    """A set of flows: ``src[i]`` sends ``sizes[i]`` bytes to ``dst[i]``.

    Parameters
    ----------
    src, dst : array-like
        GPU ranks (int) or graph node ids.
    sizes : array-like or float
        Bytes per flow, finite and >= 0 (a scalar applies to every flow).
    weights : array-like or float, optional
        Max-min weights (> 0); default 1.
    demands : array-like or float, optional
        Rate caps in bytes/s (> 0, ``inf`` for none); default no cap.

    Each is kept as a float64 array of one entry per flow (``weights`` all 1 and ``demands``
    all ``inf`` where none were given).

    Examples
    --------
    >>> f = Flows([0, 1], [1, 0], 1e9)
    >>> len(f), f.sizes.tolist()
    (2, [1000000000.0, 1000000000.0])
    >>> len(Flows.all_to_all(8, 1e6))
    56
    >>> Flows([0], [0], 1.0)
    Traceback (most recent call last):
    ...
    ValueError: flow 0 has src == dst (0); a flow needs two distinct endpoints
    """

    src: np.ndarray
    dst: np.ndarray
    sizes: np.ndarray
    weights: np.ndarray
    demands: np.ndarray

    def __init__(self, src, dst, sizes, weights=None, demands=None):
        src = _endpoints("src", src)
        dst = _endpoints("dst", dst)
        if src.shape != dst.shape:
            raise ValueError(f"src and dst must have the same length, got {len(src)} and {len(dst)}")
        n = len(src)
        try:
            sizes = np.asarray(sizes, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"sizes must be numbers of bytes (a scalar or one per flow), got {sizes!r}") from None
        if sizes.ndim == 0:
            sizes = np.full(n, float(sizes))
        if sizes.shape != (n,):
            raise ValueError(f"sizes must be a scalar or have one entry per flow ({n}), got shape {sizes.shape}")
        bad = ~np.isfinite(sizes) | (sizes < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"sizes[{i}] must be a finite number >= 0 bytes, got {sizes[i].item()!r}")
        if src.dtype == object or dst.dtype == object:
            same = np.fromiter((a == b for a, b in zip(src, dst)), dtype=bool, count=n)
        else:
            same = src == dst
        if same.any():
            i = int(np.flatnonzero(same)[0])
            raise ValueError(f"flow {i} has src == dst ({_plain(src[i])!r}); a flow needs two "
                             "distinct endpoints")
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "weights", _positive_array("weights", weights, n, allow_inf=False, default=1.0))
        object.__setattr__(self, "demands", _positive_array("demands", demands, n, allow_inf=True, default=np.inf))

    def __len__(self) -> int:
        return len(self.src)

    def __repr__(self) -> str:
        return f"Flows({len(self)} flows, {self.sizes.sum():.4g} bytes)"

    def subset(self, index) -> "Flows":
        """The flows selected by ``index`` (indices or a boolean mask)."""
        try:
            picked = self.sizes[index]
        except IndexError as err:
            raise IndexError(f"index: {err} (these Flows hold {len(self)} flows)") from None
        if np.ndim(picked) == 0:
            raise ValueError(f"index must select flows (a sequence of indices, a slice or a boolean mask), got "
                             f"{index!r}: for one flow pass [{index!r}]")
        return Flows(self.src[index], self.dst[index], self.sizes[index], self.weights[index], self.demands[index])

    @staticmethod
    def concat(parts: "list[Flows]") -> "Flows":
        """One Flows of several, in order."""
        if not parts:
            raise ValueError("concat needs at least one Flows")
        def ends(name):
            arrays = [getattr(p, name) for p in parts]
            if any(a.dtype == object for a in arrays):
                arrays = [a.astype(object) for a in arrays]
            return np.concatenate(arrays)

        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return Flows(ends("src"), ends("dst"), cat("sizes"), cat("weights"), cat("demands"))

    # ---------------------------------------------------------------- patterns
    @staticmethod
    def _ranks(n, ranks):
        """The ranks a pattern runs over: ``ranks`` (distinct GPU ranks, integers >= 0, checked
        as :class:`Flows` checks its endpoints: 1.7 is refused, not truncated to 1) or
        ``range(n)``. Given both, ``n`` must be ``len(ranks)`` (it was silently ignored)."""
        if ranks is None:
            return np.arange(integer("n", n, minimum=2), dtype=np.int64)
        try:
            arr = np.asarray(ranks)
        except ValueError:
            arr = np.asarray(list(ranks), dtype=object)
        if arr.ndim != 1:
            raise ValueError(f"ranks must be a flat sequence of distinct GPU ranks (integers >= 0), got shape "
                             f"{arr.shape}")
        if arr.dtype.kind not in "iu":
            seq = arr.tolist() if isinstance(ranks, np.ndarray) else list(ranks)    # (as given: [0, "a"] not "0")
            bad = next((v for v in seq if isinstance(v, bool) or not isinstance(v, (int, np.integer))), None)
            if bad is not None or arr.dtype.kind == "b":
                hint = (" (graph node ids: the pattern builders take GPU ranks; build Flows(src, dst, ...) for "
                        "node ids)" if isinstance(bad, str) else "")
                raise ValueError(f"ranks must hold GPU ranks (integers >= 0), got {bad!r} ({arr.dtype} "
                                 f"values){hint}")
        arr = arr.astype(np.int64)
        if (arr < 0).any():
            raise ValueError(f"ranks must hold GPU ranks (integers >= 0), got {int(arr[arr < 0][0])}")
        if len(np.unique(arr)) != len(arr):
            raise ValueError("ranks must be a sequence of distinct GPU ranks")
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) != len(arr)):
            raise ValueError(f"n ({n!r}) and ranks ({len(arr)} of them) disagree: give ranks alone, or n = "
                             "len(ranks)")
        return arr

    @classmethod
    def all_to_all(cls, n: int | None = None, size: float = 1.0, *, ranks=None) -> "Flows":
        """Every ordered pair of distinct ranks, ``size`` bytes each (n (n-1) flows).

        >>> Flows.all_to_all(3, 10.0).dst.tolist()
        [1, 2, 0, 2, 0, 1]
        """
        r = cls._ranks(n, ranks)
        p = len(r)
        _check_count(f"all_to_all over {p} ranks", p * (p - 1))
        src = np.repeat(np.arange(p), p - 1)
        off = np.tile(np.arange(1, p), p)
        dst = (src + off) % p
        order = np.lexsort((dst, src))
        return cls(r[src[order]], r[dst[order]], size)

    @classmethod
    def permutation(cls, n: int | None = None, size: float = 1.0, *, seed: int = 0, ranks=None) -> "Flows":
        """A random permutation without fixed points: every rank sends to one rank and
        receives from one (a single random cycle through all ranks).

        >>> sorted(Flows.permutation(6, seed=1).dst.tolist())
        [0, 1, 2, 3, 4, 5]
        """
        r = cls._ranks(n, ranks)
        order = np.random.default_rng(seed).permutation(len(r))
        dst = np.empty(len(r), dtype=np.int64)
        dst[order] = np.roll(order, -1)
        return cls(r, r[dst], size)

    @classmethod
    def ring(cls, n: int | None = None, size: float = 1.0, *, bidirectional: bool = False, ranks=None) -> "Flows":
        """Rank i sends to rank i+1 (and to i-1 when ``bidirectional``), wrapping around.

        >>> Flows.ring(4).dst.tolist()
        [1, 2, 3, 0]
        """
        r = cls._ranks(n, ranks)
        p = len(r)
        src, dst = np.arange(p), (np.arange(p) + 1) % p
        if bidirectional and p > 2:
            src, dst = np.concatenate([src, src]), np.concatenate([dst, (np.arange(p) - 1) % p])
        return cls(r[src], r[dst], size)

    @classmethod
    def random_pairs(cls, n: int | None = None, count: int = 1, size: float = 1.0, *, seed: int = 0,
                     ranks=None) -> "Flows":
        """``count`` flows between uniformly random distinct ranks.

        >>> len(Flows.random_pairs(16, 100, seed=3))
        100
        """
        r = cls._ranks(n, ranks)
        count = integer("count", count)
        _check_count(f"random_pairs with count={count}", count)
        rng = np.random.default_rng(seed)
        src = rng.integers(0, len(r), count)
        dst = (src + rng.integers(1, len(r), count)) % len(r)
        return cls(r[src], r[dst], size)

    @classmethod
    def incast(cls, n: int | None = None, size: float = 1.0, *, dst: int = 0, ranks=None) -> "Flows":
        """Every other rank sends to ``dst``.

        >>> Flows.incast(4, dst=2).src.tolist()
        [0, 1, 3]
        """
        r = cls._ranks(n, ranks)
        others = r[r != dst]
        if len(others) == len(r):
            raise ValueError(f"dst {dst} is not one of the ranks")
        return cls(others, np.full(len(others), dst), size)

    @classmethod
    def outcast(cls, n: int | None = None, size: float = 1.0, *, src: int = 0, ranks=None) -> "Flows":
        """``src`` sends to every other rank."""
        f = cls.incast(n, size, dst=src, ranks=ranks)
        return cls(f.dst, f.src, f.sizes)

    @classmethod
    def storage(cls, graph, size: float = 1.0, *, direction: str = "read") -> "Flows":
        """Traffic between the storage nodes of ``graph`` and its servers.

        Front-end storage (``topologies.add_storage(network="frontend")``) exchanges data
        with each server's host (``"s{i}/cpu0"``); storage on the compute fabric with each
        GPU (GPUDirect Storage). Endpoints take the storage nodes round-robin. ``size`` is
        bytes per endpoint; ``direction`` is ``"read"`` (storage to hosts/GPUs, data loading)
        or ``"write"`` (checkpoints).
        """
        if direction not in ("read", "write"):
            raise ValueError(f"direction must be 'read' or 'write', got {direction!r}")
        stores = sorted((n for n, d in graph.nodes(data=True) if d.get("kind") == "storage"), key=str)
        if not stores:
            raise ValueError("the graph has no storage nodes; attach some with topologies.add_storage")
        frontend = graph.nodes[stores[0]].get("network") == "frontend"
        if frontend:
            ends = sorted((n for n, d in graph.nodes(data=True)
                           if d.get("kind") == "cpu" and graph.has_edge(n, f"s{d.get('server')}/fe_nic")),
                          key=lambda n: graph.nodes[n]["server"])
        else:
            ends = list(range(sum(1 for _, d in graph.nodes(data=True) if d.get("kind") == "gpu")))
        store = np.empty(len(ends), dtype=object)
        store[:] = [stores[i % len(stores)] for i in range(len(ends))]
        ends_arr = np.empty(len(ends), dtype=object)
        ends_arr[:] = ends
        return cls(store, ends_arr, size) if direction == "read" else cls(ends_arr, store, size)
