"""One "graph not edited here" block (flowsolver.routing.unchanged): it pins the graph's
routing index for this thread and, with checked=True, vouches for the graph's check, which
nested blocks keep and other threads never see."""

import threading

import topologies as tp
from flowsolver import _checks
from flowsolver.routing import GraphIndex, unchanged
from topologies import _validate


class _Forgets(dict):
    """A memory of checked graphs that keeps nothing."""

    def __setitem__(self, key, value):
        pass


def test_a_graph_checked_unedited_is_not_checked_again(monkeypatch):
    """adv24 F4: every call on a generated graph computed its fingerprint (0.25 s, since it hashes
    every edge more) to trust it; a graph that passed with the same routing signature is trusted
    without, and an edit (a capacity moved between two links: every total kept) is checked again."""
    g = tp.fat_tree(4)
    g.graph.pop("generator")
    validated = []
    monkeypatch.setattr(_validate, "validate", validated.append)
    _checks.checked_graph(g)
    _checks.checked_graph(g)
    assert len(validated) == 1
    (a, b), (c, d) = [(u, v) for u, v, t in g.edges(data="tier") if t][:2]
    g.edges[a, b]["capacity"] += 1e9
    g.edges[c, d]["capacity"] -= 1e9
    _checks.checked_graph(g)
    assert len(validated) == 2


def test_the_block_pins_the_index_and_with_checked_skips_the_check(monkeypatch):
    g = tp.fat_tree(4)
    g.graph.pop("generator")                    # a hand-built graph: checked_graph validates it
    validated = []
    monkeypatch.setattr(_validate, "validate", validated.append)   # what validate_edited calls
    # (no memory of a graph checked unedited before: what the blocks vouch for alone)
    monkeypatch.setattr(_checks, "_CHECKED", _Forgets())
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
