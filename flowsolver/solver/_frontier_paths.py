"""What the frontier method sees of a routing: each flow's path as a padded table of link
ids (:func:`path_table`), and on paths wider than ``MAX_PATH`` links (fluid ECMP over many
spines) the wide segments kept apart and shared (:func:`split_paths`, :class:`WideParts`).
The widths are worked out per slot without building the table, for ``method="auto"``'s
choice, and remembered per RoutingMatrix."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

#: the widest path table (links per flow, padded) ``method="auto"`` sends to the frontier;
#: wider paths keep their wide segments apart (see :func:`split_paths`)
MAX_PATH = 32
#: in a problem whose paths are wider than ``MAX_PATH``, a segment of more links than this
#: is *wide* (fluid ECMP over many spines): it stays one shared segment, not copied per flow
WIDE_SEGMENT = 8


@dataclass
class WideParts:
    """The wide segments of a problem (see :func:`split_paths`): each flow's wide slots and
    the segments' (link, fraction) entries, host arrays before padding."""

    seg: np.ndarray              # (N, Kw) int64 wide segment id of each wide slot, -1 none
    coef: np.ndarray | None      # (N, Kw) the slot's coefficient (None: all 1)
    entry_seg: np.ndarray        # (Ew,) wide segment of each entry
    entry_link: np.ndarray       # (Ew,) its link
    entry_frac: np.ndarray       # (Ew,) its fraction (> 0)
    n_segments: int
    links: np.ndarray            # (L,) bool: the links of wide segments (no narrow segment has them)


_WIDTHS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def slot_widths(rm) -> list[int]:
    """Longest segment each slot of ``rm.flow_seg`` uses (0 for a slot no flow uses);
    remembered per RoutingMatrix (immutable), since ``auto`` asks before the solve does."""
    if (known := _WIDTHS.get(rm)) is not None:
        return known
    lengths = np.append(0, np.diff(rm.seg_ptr))          # slot -1 -> the leading 0
    # the segments each slot uses, counted (a pass over the slot, no gather per flow)
    widths = [int(lengths[np.bincount(rm.flow_seg[:, k] + 1, minlength=len(lengths)) > 0].max(initial=0))
              for k in range(rm.flow_seg.shape[1])]
    _WIDTHS[rm] = widths
    return widths


def path_width(rm) -> int:
    """Width of :func:`path_table`'s table, without building it."""
    return sum(slot_widths(rm))


def wide_segments(rm) -> np.ndarray | None:
    """Which segments stay apart (bool per segment), or None when the paths are at most
    ``MAX_PATH`` links wide: the segments of more than ``WIDE_SEGMENT`` links, and then
    every segment that shares a link with one of them (so each link's weight sums are kept
    either per link, narrow, or per segment, wide). Remembered per RoutingMatrix."""
    if (known := _WIDE.get(rm)) is not None:
        return known[0]
    wide = None
    if path_width(rm) > MAX_PATH and rm.n_segments:
        real = rm.seg_frac > 0
        wide = np.diff(rm.seg_ptr) > WIDE_SEGMENT
        while True:                     # close over shared links (a pass or two)
            links = np.zeros(rm.n_links, dtype=bool)
            links[rm.seg_link[real & wide[rm.entry_segment]]] = True
            grown = wide | (np.bincount(rm.entry_segment[real & links[rm.seg_link]],
                                        minlength=rm.n_segments) > 0)
            if (grown == wide).all():
                break
            wide = grown
    _WIDE[rm] = (wide,)
    return wide


_WIDE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def split_paths(rm):
    """The frontier's view of ``rm``: ``(path, frac, wide)``. Paths of at most ``MAX_PATH``
    links are :func:`path_table`'s (``wide`` None). Wider ones (fluid ECMP over many
    spines: 148 links per flow on fat_tree(16)) keep their wide segments apart
    (:func:`wide_segments`): the path table holds the narrow links only, and ``wide``
    (:class:`WideParts`) each flow's wide segments and their entries, which the kernel reads
    per segment, not per flow."""
    wide = wide_segments(rm)
    if wide is None:
        return (*path_table(rm), None)
    path, frac = path_table(rm, wide)
    wide_id = np.cumsum(wide) - 1
    cols, coefs = [], []
    for k in range(rm.slots):
        segs = rm.flow_seg[:, k]
        on = (segs >= 0) & wide[np.maximum(segs, 0)]
        if rm.flow_coef is not None:
            on &= rm.flow_coef[:, k] > 0
        if on.any():
            cols.append(np.where(on, wide_id[np.maximum(segs, 0)], -1))
            if rm.flow_coef is not None:
                coefs.append(np.where(on, rm.flow_coef[:, k], 0.0))
    if not cols:                        # no flow uses a wide segment
        return path, frac, None
    entries = (rm.seg_frac > 0) & wide[rm.entry_segment]
    links = np.zeros(rm.n_links, dtype=bool)
    links[rm.seg_link[entries]] = True
    parts = WideParts(np.stack(cols, axis=1), np.stack(coefs, axis=1) if coefs else None,
                      wide_id[rm.entry_segment[entries]], rm.seg_link[entries].astype(np.int64),
                      rm.seg_frac[entries].astype(np.float64), int(wide.sum()), links)
    return path, frac, parts


def split_width(rm) -> int:
    """Items per flow the frontier reads: narrow links plus wide slots (:func:`split_paths`)."""
    wide = wide_segments(rm)
    if wide is None:
        return path_width(rm)
    known = _WIDE[rm]
    if len(known) > 1:
        return known[1]
    lengths = np.where(wide, 0, np.diff(rm.seg_ptr))
    narrow = slots = 0
    for k in range(rm.slots):             # the segments each slot uses (a count, not a gather per flow)
        used = np.bincount(rm.flow_seg[:, k] + 1, minlength=rm.n_segments + 1)[1:] > 0
        narrow += int(lengths[used].max(initial=0))
        slots += bool(wide[used].any())
    _WIDE[rm] = (wide, narrow + slots)
    return narrow + slots


def path_table(rm, wide_segment=None):
    """(flows, P) link ids of each flow's path (padding ``-1``) and their fractions (``None``
    when every fraction is 1), from a RoutingMatrix's factored form: segment rows gathered
    per slot, no per-entry sort. ``wide_segment`` (bool per segment): segments left out
    (kept apart by :func:`split_paths`)."""
    S = rm.n_segments
    n_flows = rm.n_flows
    lengths = np.diff(rm.seg_ptr)
    if wide_segment is not None:
        lengths = np.where(wide_segment, 0, lengths)
    unit = rm.flow_coef is None and bool(np.all(rm.seg_frac == 1.0))
    lam = max(int(lengths.max()) if S else 0, 1)
    seg_tab = np.full((S + 1, lam), -1, dtype=np.int32)
    seg_fr = None if unit else np.zeros((S + 1, lam))
    if len(rm.seg_link):
        row = rm.entry_segment
        col = np.arange(len(rm.seg_link)) - rm.seg_ptr[row]
        keep = slice(None) if wide_segment is None else ~wide_segment[row]
        seg_tab[row[keep], col[keep]] = rm.seg_link[keep]
        if not unit:
            seg_fr[row[keep], col[keep]] = rm.seg_frac[keep]
    if wide_segment is None:
        widths = slot_widths(rm)
    else:
        ext = np.append(lengths, 0)                      # slot -1 -> the extra 0
        widths = [int(ext[rm.flow_seg[:, k]].max(initial=0)) for k in range(rm.slots)]
    P = sum(widths)
    if P == 0:
        return np.full((n_flows, 1), -1, np.int32), None
    path = np.empty((n_flows, P), np.int32)
    frac = None if unit else np.empty((n_flows, P))
    off = 0
    for k, width in enumerate(widths):
        if width == 0:
            continue
        segs = np.where(rm.flow_seg[:, k] >= 0, rm.flow_seg[:, k], S)
        # np.take of a contiguous (segments, width) table (faster: benchmarks/TUNING.md)
        path[:, off:off + width] = np.take(np.ascontiguousarray(seg_tab[:, :width]), segs, axis=0)
        if not unit:
            frac[:, off:off + width] = np.take(np.ascontiguousarray(seg_fr[:, :width]), segs, axis=0)
            if rm.flow_coef is not None:
                frac[:, off:off + width] *= rm.flow_coef[:, k:k + 1]
        off += width
    if unit:
        return path, None
    path[frac <= 0] = -1
    return path, np.where(path >= 0, frac, 0.0)
