"""Integer keys turned into positions without a loop: ranges of entries, the numbering of
the keys used (through a mask over a small key space, else a sort), and each group's own
copy of the segments and links its flows use (:class:`GroupCopies`), each element's position
in its group (:func:`positions`)."""

from __future__ import annotations

import numpy as np


class GroupCopies:
    """Each group's own copy of the segments its flows use, and of those segments' links.

    ``keys``: ``group * n_segments + segment`` for every use of a segment by a flow of a
    group (repeats allowed). Attributes: ``key_segment`` (each key's copy, numbered group by
    group in segment order), ``seg_ptr`` / ``entries`` / ``seg_link`` (the copies' link lists:
    positions in the original ``seg_link``, and each entry's linked copy), ``link`` /
    ``link_group`` (per link copy: its original link and its group). Built without a loop
    over groups: keys are numbered through a mask over the key space when that is at most
    8x the keys, else by a sort.

    >>> c = GroupCopies(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([0, 1, 2, 2]), 2, 2, 2)
    >>> c.key_segment.tolist(), c.seg_link.tolist(), c.link.tolist(), c.link_group.tolist()
    ([0, 1, 2, 2], [0, 1, 1, 2, 3], [0, 1, 0, 1], [0, 0, 1, 1])
    """

    def __init__(self, seg_ptr, seg_link, keys, n_groups: int, n_segments: int, n_links: int):
        G, S, L = int(n_groups), int(n_segments), int(n_links)
        seg_key, self.key_segment = unique_keys(keys, G * S)
        self.segment_group, self.segment = seg_key // S, seg_key % S
        lengths = np.diff(seg_ptr)[self.segment]
        self.seg_ptr = np.concatenate([[0], np.cumsum(lengths)])
        self.entries = ranges(seg_ptr[self.segment], lengths)
        used_key, self.seg_link = unique_keys(np.repeat(self.segment_group, lengths) * L + seg_link[self.entries], G * L)
        self.link_group, self.link = used_key // L, used_key % L


def unique_keys(keys, space: int):
    """``np.unique(keys, return_inverse=True)`` (inverse flat) for integer keys in
    ``0 ... space - 1``: through a mask over the key space when that is at most 8x the keys,
    else by a sort."""
    if space <= 8 * max(len(keys), 1):
        return numbered(keys, space)
    used, inverse = np.unique(keys, return_inverse=True)
    return used, inverse.reshape(-1)


def numbered(keys, space: int):
    """``np.unique(keys, return_inverse=True)`` for integer keys in ``0 ... space - 1``
    through a mask over the key space (no sort): the used keys in order, and each key's
    position among them."""
    mask = np.zeros(space, dtype=bool)
    mask[keys] = True
    number = np.cumsum(mask, dtype=np.int64) - 1
    return np.flatnonzero(mask), number[keys]


def ranges(starts, counts) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` for each (s, c), vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    nz = counts > 0
    starts, counts = starts[nz], counts[nz]
    out = np.ones(total, dtype=np.int64)
    ends = np.cumsum(counts)
    out[0] = starts[0]
    out[ends[:-1]] = starts[1:] - (starts[:-1] + counts[:-1] - 1)
    return np.cumsum(out)


def positions(groups):
    """Per element of ``groups``: its position among the elements of its group (in order)
    and the size of its group.

    >>> [a.tolist() for a in positions(np.array([1, 0, 1, 1, 0]))]
    [[0, 0, 1, 2, 1], [3, 2, 3, 3, 2]]
    """
    groups = np.asarray(groups, dtype=np.int64)
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups)
    starts = np.cumsum(sizes) - sizes
    pos = np.empty(len(groups), dtype=np.int64)
    pos[order] = np.arange(len(groups)) - starts[groups[order]]
    return pos, sizes[groups]
