"""A batched max_min_fair with a bad entry in one scenario's own row (adv18c finding 4): that
scenario reports Status.FAILED (a warning names the entry), the others are solved exactly; a
single solve still raises ValueError naming the entry. Expected rates by hand: two links,
flow 1 on both (progressive filling)."""

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs

A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])


@pytest.mark.parametrize("method", ["dense", "frontier", "exact"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_nan_capacity_fails_its_scenario_only(method, dtype):
    caps = np.array([[2.0, 4.0], [np.nan, 4.0], [3.0, 3.0]])
    with pytest.warns(RuntimeWarning, match=r"scenario 1 reports Status.FAILED: capacity\[scenario 1, 0\] must be "
                                            r"a number >= 0 bytes/s \(0 = failed link\), got nan"):
        a = fs.max_min_fair(A, caps, method=method, dtype=dtype)
    assert a.status.tolist() == [fs.Status.OK, fs.Status.FAILED, fs.Status.OK]
    # scenario 0: link 0 (2) holds flows 0, 1 at 1; flow 2 takes 4 - 1 = 3. scenario 2: 3 / 2 each
    assert np.allclose(a.rates[0], [1.0, 1.0, 3.0], rtol=1e-6) and np.allclose(a.rates[2], [1.5] * 3, rtol=1e-6)
    assert np.isnan(a.rates[1]).all() and np.isnan(a.link_load[1]).all()
    assert np.isnan(a.capacity[1, 0])                 # the allocation carries what was passed


def test_bad_weights_and_caps_per_scenario():
    w = np.array([[1.0, 1.0, 1.0], [1.0, np.inf, 1.0], [1.0, 1.0, 1.0]])
    with pytest.warns(RuntimeWarning, match=r"weights\[scenario 1, 1\] must be a finite number > 0, got inf"):
        a = fs.max_min_fair(A, [2.0, 4.0], weights=w)
    assert a.status.tolist() == [0, fs.Status.FAILED, 0]
    d = np.array([[1.0, 1.0, 1.0], [0.5, 0.5, 0.5], [1.0, -1.0, np.nan]])
    with pytest.warns(RuntimeWarning, match=r"demands\[scenario 2, 1\] must be a number >= 0"):
        b = fs.max_min_fair(A, [2.0, 4.0], demands=d)
    assert b.status.tolist() == [0, 0, fs.Status.FAILED]
    assert np.allclose(b.rates[:2], [[1.0] * 3, [0.5] * 3])          # every flow at its cap


def test_single_solve_and_shared_rows_still_raise():
    with pytest.raises(ValueError, match=r"capacity\[0\] must be a number >= 0 bytes/s \(0 = failed link\), got nan"):
        fs.max_min_fair(A, [np.nan, 4.0])
    # a bad entry every scenario shares (a 1-D row beside a batched one) fails them all: raised
    with pytest.raises(ValueError, match=r"capacity\[1\] must be a number >= 0"):
        fs.max_min_fair(A, [2.0, -1.0], weights=np.ones((2, 3)))


@pytest.mark.parametrize("compact", ["no", 1, 0.0, "False"])
def test_compact_must_be_a_bool(compact):
    # adv18c finding 6: compact="no" was taken as True (bool("no"))
    with pytest.raises(ValueError, match="compact must be True, False or None"):
        fs.max_min_fair(A, [2.0, 4.0], compact=compact)
