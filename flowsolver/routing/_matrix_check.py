"""The check a RoutingMatrix built by hand gets before the solver reads it."""

from __future__ import annotations

import weakref

import numpy as np


#: the RoutingMatrix objects whose arrays were checked (immutable: once each; held weakly)
_CHECKED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def checked_matrix(rm):
    """``rm`` once its arrays hold together (a matrix built by hand is public: a link index past
    the capacities came back as an infinite rate with status ok), else ValueError naming the
    field. One pass over its entries and slots, once per matrix object."""
    if rm in _CHECKED:
        return rm
    L, ptr = rm.n_links, np.asarray(rm.seg_ptr)
    for name in ("seg_ptr", "seg_link", "flow_seg"):     # indices: 1.7 would be cut to 1 unseen
        if (kind := np.asarray(getattr(rm, name)).dtype).kind not in "iu":
            raise ValueError(f"routing: a RoutingMatrix's {name} must be an integer array, got dtype {kind}")
    problems = []
    if ptr.ndim != 1 or len(ptr) < 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != len(rm.seg_link):
        problems.append(f"seg_ptr must rise from 0 to len(seg_link) = {len(rm.seg_link)}")
    elif len(rm.seg_frac) != len(rm.seg_link):
        problems.append(f"seg_frac must have one fraction per seg_link entry ({len(rm.seg_link)})")
    elif len(rm.seg_link) and not (0 <= rm.seg_link.min() and rm.seg_link.max() < L):
        problems.append(f"seg_link must be link indices in 0 ... {L - 1} (len(capacity) links), got "
                        f"{int(rm.seg_link.min())} ... {int(rm.seg_link.max())}")
    elif not (np.isfinite(rm.seg_frac).all() and (rm.seg_frac >= 0).all()):
        problems.append("seg_frac must be finite fractions >= 0")
    seg = np.asarray(rm.flow_seg)
    if seg.ndim != 2:
        problems.append(f"flow_seg must be 2-D (flows x slots), got shape {seg.shape}")
    elif seg.size and not (-1 <= seg.min() and seg.max() < rm.n_segments):
        problems.append(f"flow_seg must be segment indices in -1 ... {rm.n_segments - 1}, got "
                        f"{int(seg.min())} ... {int(seg.max())}")
    elif rm.flow_coef is not None and (np.shape(rm.flow_coef) != seg.shape or not (
            np.isfinite(rm.flow_coef).all() and (np.asarray(rm.flow_coef) >= 0).all())):
        problems.append(f"flow_coef must be None or finite coefficients >= 0 of flow_seg's shape {seg.shape}")
    for name, n in (("weights", rm.n_flows), ("demands", rm.n_flows)):
        if np.shape(getattr(rm, name)) != (n,):
            problems.append(f"{name} must have one value per flow ({n}), got shape {np.shape(getattr(rm, name))}")
    if problems:
        raise ValueError(f"routing: a RoutingMatrix whose arrays do not hold together: {'; '.join(problems)}")
    _CHECKED[rm] = True
    return rm
