"""A wide ``(lo, hi)`` length range is checked from its bounds (adv20a F4): serve used to build
every integer of the range (``--output 1:10000000000``: 74.5 GiB) before refusing it."""

import time
import tracemalloc
import warnings

import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving._serve import _least, _most
from flowsolver.serving._steady import spec_mean


def test_bounds_of_a_range_take_no_memory():
    tracemalloc.start()
    try:
        lo, hi, mean = _least((1, 10 ** 7)), _most((1, 10 ** 7)), spec_mean((1, 10 ** 7))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (lo, hi, mean) == (1, 10 ** 7, (1 + 10 ** 7) / 2)
    assert peak < 2 ** 20                  # was 80 MB: 10^7 float64s
    assert (_least([5, 2, 9]), _most([5, 2, 9]), _least(7), _most(7)) == (2, 9, 7, 7)


def test_an_output_range_beyond_the_context_is_refused_at_once():
    warnings.simplefilter("ignore")
    g = tp.rail_optimized(nodes=1)
    t = time.perf_counter()
    with pytest.raises(ValueError, match=r"output= \(up to 1099511627776\).*beyond llama-3-8b's context of 8192"):
        fs.serve(g, "llama-3-8b", rate=1.0, duration=2.0, tp=8, output=(1, 2 ** 40))   # was an 8 TiB np.arange
    assert time.perf_counter() - t < 30
