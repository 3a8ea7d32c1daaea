"""The interleaved pipeline's activation peak for any microbatch count, against a pass-by-pass
replay of Megatron's order, and in bounded time and memory for a huge count."""

import itertools

import numpy as np
import pytest

from flowsolver.training._pipeline import pass_order, peak_in_flight


def _replay_peak(weights, stage, pp, vp, microbatches):
    """Walk pass_order: a forward of chunk c adds weights[c], its backward frees it; the
    largest sum held at any moment."""
    held = peak = 0.0
    for direction, _, chunk in pass_order(stage, pp, vp, microbatches):
        held += weights[chunk] if direction == "F" else -weights[chunk]
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize("pp,vp", [(2, 2), (4, 2), (3, 3), (4, 4)])
def test_peak_equals_the_replay_for_every_count(pp, vp):
    rng = np.random.default_rng(pp * 10 + vp)
    weights = tuple(float(w) for w in rng.integers(1, 9, size=vp))
    for stage, m in itertools.product(range(pp), range(1, 6 * pp + 3)):
        assert peak_in_flight(weights, stage, pp, vp, m) == pytest.approx(
            _replay_peak(weights, stage, pp, vp, m)), (stage, m)


def test_a_huge_microbatch_count_is_bounded():
    """A billion microbatches at pp 4, vp 2 built arrays of 2e9 passes (16 GB each) before; the
    peak is the replay's at 64 microbatches (past the warm-up and one period it stops growing)."""
    weights = (3.0, 5.0)
    assert peak_in_flight(weights, 0, 4, 2, 10**9) == _replay_peak(weights, 0, 4, 2, 64)
