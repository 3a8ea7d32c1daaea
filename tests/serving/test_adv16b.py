"""adv16b's findings on serving: an overloaded queue is not steady (1), the step tables reach the
spec's longest prompt (2), a light load's advice and throughput (4), prompts beyond the model's
context (5), the prefill table's empty and non-positive lengths (7)."""

import warnings

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs


@pytest.fixture(scope="module")
def small():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=2.0, duration=2.0, prompt=128, output=8, tp=8)


@pytest.mark.parametrize("lengths", [[], [0, 0], [-100], [128, 0], [float("nan")]])
def test_prefill_table_refuses_no_prompt_or_non_positive_lengths(small, lengths):
    # a prefill step of no tokens is no step: prefill_step(0) is refused, so is the table's (it read
    # 1.116 ms, all communication, for [], [0, 0] and [-100])
    with pytest.raises(ValueError, match=r"tokens must be an integer >= 1"):
        small.prefill_step(0)
    with pytest.raises(ValueError, match=r"lengths must be a non-empty 1-D list of prompt lengths >= 1"):
        small.step_tables["prefill"](lengths)


def test_prefill_table_of_one_prompt_is_prefill_step(small):
    assert small.step_tables["prefill"]([128]) == small.prefill_step(128)

