"""A log whose table gives a size twice (adv17c finding 4): read with every row kept and a
RuntimeWarning naming the sizes, saying whether the repeat is the whole table in order (what
nccl-tests -N prints: src/common.cu's TimeTest loops over the size range once per cycle and
prints no line between cycles) or rows of two runs run together. Sizes repeated under another
type, reduction or root (nccl-tests' -d all / -o all / -r -1 loops) are not a repeat."""

import re
import warnings

import pytest

from flowsolver import nccl_tests

_HEAD = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 32 step: 2(factor) warmup iters: 5 iters: 20\n"
         "#  Rank  0 Group  0 Pid 1 on hostA device  0 [0x0f] NVIDIA H100 80GB HBM3\n"
         "#  Rank  1 Group  0 Pid 2 on hostB device  0 [0x0f] NVIDIA H100 80GB HBM3\n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
         " #wrong\n")
_BYTES = {"float": 4, "double": 8}


def _log(rows):
    """A 2-rank all-reduce log of (size, type) rows, in this order (times of ~20 us: algbw 0.00 GB/s)."""
    lines = [f"{s:12d} {s // _BYTES[t]:13d} {t:>9s}     sum      -1    20.10    0.00    0.00      0    20.00    0.00"
             f"    0.00      0" for s, t in rows]
    return _HEAD + "\n".join(lines) + "\n# Avg bus bandwidth    : 0.00\n"


def _read(text):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        df = nccl_tests.read(text, op="all_reduce")
    return df, [str(w.message) for w in said if issubclass(w.category, RuntimeWarning)]


def test_a_table_repeated_whole_and_in_order_is_said_to_be_cycles_and_kept():
    sizes = [8, 16, 32] * 3                             # nccl-tests -N 3
    df, said = _read(_log([(s, "float") for s in sizes]))
    assert list(df["size"][df["placement"] == "out-of-place"]) == sizes    # every row, in the log's order
    assert len(df) == 2 * len(sizes)                                        # out-of-place and in-place
    assert len(said) == 1 and "(8, 16, 32) 3 times each, in order: nccl-tests -N 3 (--run_cycles)" in said[0]


@pytest.mark.parametrize("sizes, named", [([8, 8, 16, 16, 32, 32], "8, 16, 32"),      # two runs interleaved
                                          ([8, 16, 32, 8], "8"),                      # a cycle cut short
                                          ([8, 16, 16, 32], "16")])
def test_rows_repeated_otherwise_are_said_to_be_two_runs_and_kept(sizes, named):
    df, said = _read(_log([(s, "float") for s in sizes]))
    assert list(df["size"][df["placement"] == "in-place"]) == sizes
    assert len(said) == 1
    assert re.search(rf"gives sizes {named} more than once .*not as whole cycles.*two runs run together", said[0])


def test_sizes_repeated_under_another_type_are_no_repeat():
    # nccl-tests -d all prints the size range once per type (src/all_reduce.cu's loop over types)
    rows = [(s, t) for t in ("float", "double") for s in (8, 16, 32)]
    df, said = _read(_log(rows))
    assert len(df) == 12 and said == []
    assert _read(_log([(s, "float") for s in (8, 16, 32)]))[1] == []
