"""A batched rate_sensitivity with a scenario that FAILED gives that scenario None and the
others their structure (adv20b F2; concepts.md: batched work reports per scenario)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs


def test_a_failed_scenario_does_not_refuse_the_batch():
    A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])       # flow 1 crosses both links
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = fs.max_min_fair(A, np.array([[3.0, 1.0], [np.nan, 1.0], [4.0, 4.0]]))
    assert a.status.tolist()[1] == fs.Status.FAILED
    with pytest.warns(RuntimeWarning, match=r"scenarios \[1\] are not ok"):
        sens = fs.rate_sensitivity(A, a)
    assert sens[1] is None
    # scenario 0 by hand: link 1 (capacity 1) holds flow 1 at 1, flow 0 takes 3 - 1 on link 0:
    # d r0 / d c0 = 1, d r0 / d c1 = -1, d r1 / d c1 = 1
    assert sens[0].capacity_jacobian().toarray().tolist() == [[1.0, -1.0], [0.0, 1.0]]
    # scenario 2: link 0 (4 for two flows) holds both at 2, link 1 has room: each d r / d c0 = 1/2
    assert sens[2].capacity_jacobian().toarray().tolist() == [[0.5, 0.0], [0.5, 0.0]]
    single = fs.max_min_fair(A, np.array([3.0, 1.0]))
    assert fs.rate_sensitivity(A, single).capacity_jacobian().toarray().tolist() == [[1.0, -1.0], [0.0, 1.0]]
