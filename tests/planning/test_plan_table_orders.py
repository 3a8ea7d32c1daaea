"""Plan.table: layouts that differ only in their rank order and take the same time share a row
naming the orders (newuser27 #8: on a symmetric fabric every layout was listed twice)."""

from flowsolver.planning._result import Plan, PlanRow
from flowsolver.planning._space import Layout


def _row(order, step, tp=8):
    lay = Layout(tp=tp, cp=1, pp=8, dp=32, ep=1, vp=8, micro_batch=1, recompute="none", zero=1,
                 sequence_parallel=True, order=order)
    return PlanRow(layout=lay, step_time=step, tokens_per_gpu=1.0, mfu=0.5, memory=7e10, compute=1.0, bubble=0.1,
                   exposed=dict(tp=0.0, cp=0.0, pp=0.0, ep=0.0, dp=0.0), bottleneck_tier="access", bound=1.0)


def test_tied_rank_orders_share_a_row():
    rows = [_row(("tp", "cp", "pp", "dp"), 2.0), _row(("tp", "cp", "dp", "pp"), 2.0 * (1 + 1e-12)),
            _row(("tp", "cp", "pp", "dp"), 2.5, tp=4), _row(("tp", "cp", "dp", "pp"), 2.6, tp=4)]
    lines = Plan.table(None, rows).splitlines()[1:]
    assert len(lines) == 3                                   # the tie merged; 2.5 and 2.6 s differ
    assert "tp-cp-pp-dp | tp-cp-dp-pp" in lines[0] and lines[0].split()[0] == "1"
    assert lines[1].split()[0] == "3" and "tp-cp-pp-dp" in lines[1] and "|" not in lines[1]   # rows' numbers
    assert lines[2].split()[0] == "4"
    assert "tp-cp-dp-pp" in lines[2]
