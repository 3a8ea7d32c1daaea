"""The values of a collective's options, checked one at a time: a number of seconds, a link
efficiency (and its keys against the graphs' link technologies), an NCCL release."""

from __future__ import annotations

import math
import numbers
import re

import numpy as np

import topologies as tp

from .. import _checks
from ..routing import LinkTable, graph_memo

__all__ = ["MAX_HOST_OVERHEAD", "check_efficiency_keys", "nccl_release"]


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


#: the largest ``host_overhead`` accepted (seconds): a host's work to issue one collective is
#: microseconds (:data:`~flowsolver.collectives._host.TORCH_CALL_OVERHEAD`, 25 us); ten
#: milliseconds is already a stalled host, and a larger value is a unit slip
MAX_HOST_OVERHEAD = 0.01


def _seconds(name: str, value) -> None:
    """None, or a finite number of seconds >= 0."""
    if value is None:
        return
    if not _real(value) or not math.isfinite(float(value)) or value < 0:
        raise ValueError(f"{name} must be None or a finite number of seconds >= 0, got {_checks._plain(value)!r}")


def _efficiency(value) -> None:
    """None, a fraction in (0, 1], or a dict of them by technology name."""
    if value is None:
        return
    if isinstance(value, dict):
        for tech, fraction in value.items():
            if not isinstance(tech, str):
                raise ValueError(f"efficiency keys must be link technology names (str), got {tech!r}")
            _checks.fraction(f"efficiency[{tech!r}]", fraction, zero_ok=False)
        return
    if not _real(value):
        raise ValueError(f"efficiency must be None, a fraction in (0, 1] of the raw link rate, or a dict of them "
                         f"by link technology, got {_checks._plain(value)!r}")
    _checks.fraction("efficiency (the fraction of the raw link rate reached)", value, zero_ok=False)


def graph_technologies(graph) -> set:
    """The link technologies named on ``graph``'s links (its link table's, kept with it while it
    is unchanged)."""
    def build():
        links = graph_memo(graph, "links", lambda: LinkTable.from_graph(graph))
        return {str(t) for t in set(links.tech) if t}
    return graph_memo(graph, "techs", build)


def check_efficiency_keys(efficiency, graphs) -> None:
    """ValueError when an ``efficiency`` dict names a technology that is neither in the
    ``topologies`` link catalogue (:func:`topologies.link_names`, with the user's own
    :func:`topologies.register_link` entries) nor on a link of one of ``graphs``: a
    mistyped key would otherwise apply to no link, silently. A catalogue technology the
    graph lacks is allowed (one dict for several fabrics: NDR and HDR variants)."""
    if not isinstance(efficiency, dict):
        return
    present = set()
    for g in graphs:
        present.update(graph_technologies(g))
    unknown = sorted(set(efficiency) - present - set(tp.link_names()))
    if unknown:
        raise ValueError(f"efficiency names unknown link technolog{'y' if len(unknown) == 1 else 'ies'} "
                         f"{', '.join(map(repr, unknown))}: the graph's links are "
                         f"{', '.join(sorted(present)) or 'of no technology (no tech attribute)'}; the catalogue's are "
                         f"{', '.join(sorted(tp.link_names()))}")


#: the newest NCCL release whose source the model follows (src/graph/tuning.cc, enqueue.cc of
#: v2.30): a later ``nccl_version`` is run with its rules, and a warning says so
MODEL_RELEASE = (2, 30)
_RELEASE = re.compile(r"(\d{1,2})\.(\d{1,3})(?:\.\d{1,3})?(?:-\d+)?(?:\+[\w.]+)?")


def nccl_release(version) -> tuple | None:
    """``(major, minor)`` of an ``nccl_version`` (``"2.18"``, ``"2.18.3-1"``, ``"2.26.2+cuda12.8"``
    or a ``(major, minor)`` tuple; None: NCCL as the model follows it), checked.

    >>> nccl_release("2.18.3-1"), nccl_release((2, 30)), nccl_release(None)
    ((2, 18), (2, 30), None)
    >>> nccl_release("3.0")
    Traceback (most recent call last):
    ...
    ValueError: nccl_version must be an NCCL release such as "2.18" or "2.18.3-1" (from 2.0), got '3.0'
    >>> nccl_release("2.x")
    Traceback (most recent call last):
    ...
    ValueError: nccl_version must be an NCCL release such as "2.18" or "2.18.3-1" (from 2.0), got '2.x'

    A release after :data:`MODEL_RELEASE` is taken, with a ``UserWarning`` that 2.30's rules apply.
    """
    if version is None:
        return None
    if isinstance(version, tuple) and len(version) == 2 and all(type(v) is int for v in version):
        release = version
    elif isinstance(version, str) and (m := _RELEASE.fullmatch(version.strip())):
        release = (int(m.group(1)), int(m.group(2)))
    else:
        release = None
    if release is None or release < (2, 0) or release[0] > 2:     # NCCL 2's releases (2.0 - 2.x); no 3.x exists
        raise ValueError(f"nccl_version must be an NCCL release such as \"2.18\" or \"2.18.3-1\" (from 2.0), "
                         f"got {_checks._plain(version)!r}")
    if release > MODEL_RELEASE:
        _checks.warn_at_caller(f"nccl_version {_checks._plain(version)!s}: newer than NCCL {MODEL_RELEASE[0]}.{MODEL_RELEASE[1]}, "
                               "the newest release whose rules the model follows; those apply")
    return release
