"""adv19b F4: a pipeline stage sends its whole activation, [seq / cp, micro_batch, hidden] in bf16,
unless sequence parallelism shards it over tp (Megatron-Core's get_tensor_shapes in
megatron/core/pipeline_parallel/schedules.py divides the sequence by the TP size only
``if config.sequence_parallel``)."""

import pytest
import topologies as tp

from flowsolver import Parallelism, Schedule, training_step
from flowsolver.training import ParallelLayout, get_model
from flowsolver.training._profile import step_collectives

SEQ, HIDDEN, BF16 = 8192, 4096, 2          # Llama 3 8B


@pytest.mark.parametrize("sp, tp_, cp, mb", [(True, 2, 1, 1), (False, 2, 1, 1), (False, 2, 2, 2), (True, 4, 2, 1)])
def test_pp_send_bytes_by_hand(sp, tp_, cp, mb):
    lay = ParallelLayout(tp=tp_, pp=2, dp=1, cp=cp)
    plan = {name: size for name, _, _, size, _ in step_collectives(get_model("llama-3-8b"), lay, mb, 1, sp, 1, 1.0,
                                                                    groups=lambda kind: [[0, 1]])}
    assert plan["pp"] == mb * SEQ / cp * HIDDEN * BF16 / (tp_ if sp else 1)


def test_step_without_sequence_parallelism_sends_tp_times_more():
    g = tp.rail_optimized(1)                            # TP 2 x PP 4 on one DGX
    steps = {sp: training_step(g, "llama-3-8b", Parallelism(tp=2, pp=4, sequence_parallel=sp),
                               Schedule(global_batch=8)) for sp in (True, False)}
    assert steps[False].phases["pp"].bytes == SEQ * HIDDEN * BF16                # 67.1 MB
    assert steps[True].phases["pp"].bytes == SEQ * HIDDEN * BF16 / 2             # 33.6 MB
    assert steps[False].phases["pp"].per_call > 1.5 * steps[True].phases["pp"].per_call
