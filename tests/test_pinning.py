"""One "graph not edited here" block (flowsolver.routing.unchanged): it pins the graph's
routing index for this thread and, with checked=True, vouches for the graph's check, which
nested blocks keep and other threads never see."""

import threading

import topologies as tp
from flowsolver import _checks
from flowsolver.routing import GraphIndex, unchanged
from topologies import _validate


def test_the_block_pins_the_index_and_with_checked_skips_the_check(monkeypatch):
    g = tp.fat_tree(4)
    g.graph.pop("generator")                    # a hand-built graph: checked_graph validates it
    validated = []
    monkeypatch.setattr(_validate, "validate", validated.append)   # what validate_edited calls
    _checks.checked_graph(g)
    assert len(validated) == 1
    with unchanged(g) as ix:
        assert GraphIndex.of(g) is ix
        _checks.checked_graph(g)                # a plain block does not vouch for the check
        assert len(validated) == 2
    with unchanged(g, checked=True) as ix:
        _checks.checked_graph(g)
        with unchanged(g) as inner:             # nested: the same index, still vouched for
            assert inner is ix
            _checks.checked_graph(g)
        assert len(validated) == 2
        other = threading.Thread(target=_checks.checked_graph, args=(g,))
        other.start()
        other.join()
        assert len(validated) == 3              # another thread's call is not inside the block
    _checks.checked_graph(g)
    assert len(validated) == 4                  # closed: checked again
    assert id(g) not in _checks.PINS.by_graph
