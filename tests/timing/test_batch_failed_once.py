"""A batched completion_times with one scenario its solve refuses: that scenario reports its
status once (one warning, naming the entry), the others keep the times a hand count gives."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs


@pytest.mark.parametrize("bad", ["capacity", "weights"])
def test_failed_scenario_warns_once_and_the_other_is_exact(bad):
    A = sp.csc_matrix([[1.0, 1.0, 1.0]])             # three flows on one link
    cap = [[1.0], [np.nan if bad == "capacity" else 1.0]]
    weights = [[1.0, 1.0, 1.0], [np.nan if bad == "weights" else 1.0, 1.0, 1.0]]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = fs.completion_times(A, sizes=[1.0, 2.0, 3.0], capacity=cap, weights=weights)
    messages = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages             # three events: it warned on each before
    assert f"scenario 1 reports Status.FAILED: {bad}[scenario 1, 0]" in messages[0]
    assert c.status.tolist() == [fs.Status.OK, fs.Status.FAILED]
    # scenario 0 by hand: 3 flows at 1/3 B/s: the 1-byte one at 3 s, then 2 at 1/2: 5 s, then 6 s
    np.testing.assert_allclose(c.finish[0], [3.0, 5.0, 6.0], rtol=1e-9)
    assert np.isnan(c.finish[1]).all() and np.isnan(c.makespan[1])
