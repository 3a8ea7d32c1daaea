"""Daly's closed form beside the Monte Carlo: no overflow on absurd inputs, and the repair
wait of a job without spares in its downtime."""

import math

import pytest

import topologies as tp
from flowsolver.reliability import JobResponse, default_components, goodput, daly_useful_fraction


def test_daly_fraction_past_the_float_range_is_zero_or_its_exact_small_value():
    # R / M = 710: e^(R/M) is beyond a double (math.exp raises), the fraction is not:
    # tau / (M e^(R/M) (e^((tau+C)/M) - 1)) = e^-710 x tau / (M (e^((tau+C)/M) - 1))
    m, tau, c = 3600.0, 800.0, 30.0
    expect = math.exp(-710.0) * tau / (m * math.expm1((tau + c) / m))
    assert expect > 0
    assert daly_useful_fraction(tau, c, 710.0 * m, m) == pytest.approx(expect, rel=1e-9)
    # a restart of 3e8 MTBFs, or a checkpoint of 2,800: below the smallest double
    assert daly_useful_fraction(tau, c, 1e12, m) == 0.0
    assert daly_useful_fraction(tau, 1e7, 0.0, m) == 0.0
    # and the ordinary range is unchanged: 1 / (e^0.11 - 1) x 0.1 with R = 0
    assert daly_useful_fraction(360.0, 36.0, 0.0, 3600.0) == pytest.approx(0.1 / math.expm1(0.11), rel=1e-12)
