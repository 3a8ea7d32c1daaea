"""The replay-against-step figures docs/guide/traces.md quotes, re-run: each is the replay of
the step's own trace on the same graph over the step's time, less 1 (the page names the
settings)."""

import re
from pathlib import Path

import pytest

import topologies as tp
from flowsolver.traces import replay, workload_from_step

from .test_traces_roundtrip import MOE, SIXTEEN, _hosts, training_step

_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "traces.md"


def _delta(graph, **kw) -> str:
    step = training_step(graph, **kw)
    return f"{(replay(graph, workload_from_step(step)).iteration_time / step.step_time - 1) * 100:+.1f} %"


@pytest.mark.filterwarnings("ignore")
def test_the_pages_replay_deltas():
    text = " ".join(_PAGE.read_text().split())
    pp = _delta(_hosts(8), model=SIXTEEN, pp=4, vp=2, global_batch=16)
    assert f"{pp} for PP 4 x VP 2 x DP 2 on 8 one-GPU hosts, 16 layers, 16 sequences" in text
    g = tp.rail_optimized(4)
    moe = _delta(g, model=MOE, tp=8, cp=2, ep=2, global_batch=8)
    alone = _delta(g, model=MOE, tp=8, cp=2, ep=2, global_batch=8, dp_overlap=0.0)
    said = re.search(r"TP 8 x CP 2 x EP 2 x DP 2 on 4 DGX H100, 8 sequences: (\S+ %), (\S+ %) with", text)
    assert said is not None and (said.group(1), said.group(2)) == (moe, alone)
