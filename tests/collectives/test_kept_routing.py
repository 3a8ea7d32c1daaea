"""A result keeps its steps' routing for its derivatives up to KEEP_ROUTING_BYTES; past it
none, and what needs it says why (a caller keeping many large results held them all: a tree
over 20 NVL72 racks keeps ~3.4 GB a result)."""

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives import _results


def _routing_bytes(result):
    der = result.solved_on
    kept = {id(rm): rm for rm, *_ in der.steps}
    if der.tuned is not None:
        kept.update({id(rm): rm for rm, *_ in (*der.tuned.ring, *der.tuned.own)})
    return sum(rm.nbytes for rm in kept.values())


@pytest.mark.parametrize("algorithm", ["ring", "nvls_tree"])       # flow-solved, NCCL's cost model
def test_past_the_limit_a_result_keeps_no_routing_and_says_why(monkeypatch, algorithm):
    g = tp.rail_optimized(2)
    full = fs.collective(g, "all_reduce", 2**28, algorithm=algorithm)
    size = _routing_bytes(full)
    assert size > 0 and np.any(full.time_gradient("down") != 0)
    monkeypatch.setattr(_results, "KEEP_ROUTING_BYTES", size - 1)
    lean = fs.collective(g, "all_reduce", 2**28, algorithm=algorithm)
    assert lean.time == full.time and lean.busbw == full.busbw           # the answer does not change
    assert lean.solved_on.steps == () and lean.solved_on.tuned is None
    with pytest.raises(ValueError, match="KEEP_ROUTING_BYTES"):
        lean.time_gradient("down")
    with pytest.raises(ValueError, match="KEEP_ROUTING_BYTES"):
        lean.sensitivity()
    monkeypatch.setattr(_results, "KEEP_ROUTING_BYTES", size)             # at the limit: kept
    assert _routing_bytes(fs.collective(g, "all_reduce", 2**28, algorithm=algorithm)) == size
