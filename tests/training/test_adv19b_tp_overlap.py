"""adv19b M1: the TP overlap is on or off (Transformer Engine's userbuffers, PyTorch's async TP):
any tp_overlap > 0 runs the overlapped GEMMs with their whole cost, whatever the fraction of the
traffic it hides (the documented behaviour: training_step's docstring, docs/guide/training.md)."""

import topologies as tp

from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import layer_compute


def test_any_positive_tp_overlap_pays_the_whole_overlap_cost():
    r = training_step(tp.rail_optimized(1), "llama-3-8b", Parallelism(tp=8), Schedule(global_batch=4))
    gemms = {x: layer_compute(r.profile, r.recompose(tp_overlap=x).schedule)["layer"] for x in (0.0, 0.05, 0.5, 1.0)}
    assert gemms[0.05] == gemms[0.5] == gemms[1.0] != gemms[0.0]
    # what the fraction changes is the TP traffic exposed: less of it the more is hidden
    exposed = [r.recompose(tp_overlap=x).phases["tp"].exposed for x in (0.05, 0.5, 1.0)]
    assert exposed[0] > exposed[1] > exposed[2]


def test_the_docs_say_so():
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "training.md").read_text()
    assert "The TP overlap is on or off" in " ".join(guide.split())
    assert "on or off" in " ".join(training_step.__doc__.split())
