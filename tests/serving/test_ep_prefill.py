"""Prefill with attention data parallelism (ep > 1): each prompt whole on one attention rank,
the experts spread over the ranks, the step as long as the busiest rank; against the FLOP
counts by hand and the collectives solved alone."""

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving._steps import deal_longest_first

# Mixtral 8x7B (paper, table 1): 32 layers, hidden 4096, FFN 14336 (gated: 3 matrices), 32 heads
# of 128, 8 KV heads, vocabulary 32000, 8 experts, top 2; H100 SXM 989 TFLOP/s dense BF16
# (datasheet); serve's flat-model default efficiencies 0.44 (GEMMs, DEFAULT_COMPUTE_EFFICIENCY) and
# 0.62 (attention)
L, H, F, KVH, D, V, K, E = 32, 4096, 14336, 8, 128, 32000, 2, 8
ATTENTION = 2 * H * H + 2 * H * KVH * D          # q, o and k, v projections of a layer
EXPERT = 3 * H * F
GEMM, SCORES = 989e12 * 0.44, 989e12 * 0.62


def attention_seconds(lengths):
    """One attention rank's work for its prompts: projections, causal scores, last-token logits."""
    lengths = np.asarray(lengths, dtype=np.float64)
    return (2 * lengths.sum() * L * ATTENTION / GEMM + 2 * H * L * np.sum(lengths ** 2) / SCORES
            + 2 * len(lengths) * V * H / GEMM)


def expert_seconds(tokens, ep):
    """Every token's top-2 expert GEMMs, spread evenly over the ep ranks."""
    return 2 * tokens * L * K * EXPERT / ep / GEMM


@pytest.fixture(scope="module")
def ep8():
    """Mixtral on one DGX H100 as one instance of 8 attention ranks (tp 1, ep 8)."""
    g = tp.rail_optimized(1)
    r = fs.serve(g, "mixtral-8x7b", rate=0.2, duration=10, prompt=4096, output=8, tp=1, ep=8, token_budget=4096,
                 compute_efficiency=0.44)      # the flat model
    return g, r


def all_to_alls(graph, tokens_per_rank):
    """2 L all-to-alls (dispatch and combine) of tokens x top 2 x h x 2 bytes per rank, alone on the server."""
    size = tokens_per_rank * K * H * 2
    return 2 * L * fs.collective(graph, "all_to_all", size, ranks=range(8), protocol="auto").time


def test_one_prompt_runs_its_attention_on_one_rank(ep8):
    # one 4,096-token prompt: its attention (projections 11.0 TFLOP at 0.44 x 989 TFLOP/s, 25.3 ms;
    # scores 4.4 TFLOP at 0.62 x 989, 7.2 ms) on one rank, the experts' 1/8 on each (11.5 TFLOP,
    # 26.5 ms): ~59 ms of compute, where 1/8 of everything on each rank gave ~30 ms
    g, r = ep8
    seconds, comm = r.prefill_step(4096, sequences=1)
    compute = attention_seconds([4096]) + expert_seconds(4096, 8)
    assert compute == pytest.approx(0.0590, rel=0.01)
    # that rank sends all 4,096 tokens' top-2 copies in each all-to-all (2^26 bytes: on the table's grid)
    assert comm == pytest.approx(all_to_alls(g, 4096), rel=1e-9)
    assert seconds == pytest.approx(compute + comm, rel=1e-12)


def test_equal_prompts_one_per_rank_keep_the_even_split(ep8):
    # 8 prompts of 512 tokens: one per rank, each rank 1/8 of the step's attention and experts
    g, r = ep8
    seconds, comm = r.prefill_step(4096, sequences=8)
    compute = (2 * 4096 * L * (ATTENTION + K * EXPERT) / GEMM + 2 * H * L * 8 * 512 ** 2 / SCORES
               + 2 * 8 * V * H / GEMM) / 8
    assert comm == pytest.approx(all_to_alls(g, 512), rel=1e-9)
    assert seconds == pytest.approx(compute + comm, rel=1e-12)


def test_unequal_prompts_wait_for_the_busiest_rank(ep8):
    g, r = ep8
    prefill = r.step_tables["prefill"]
    # nine prompts of 1,024 on 8 ranks: one rank holds two (2,048 tokens), the step waits for it
    seconds, comm = prefill(np.full(9, 1024))
    compute = attention_seconds([1024, 1024]) + expert_seconds(9 * 1024, 8)
    assert comm == pytest.approx(all_to_alls(g, 2048), rel=1e-9)
    assert seconds == pytest.approx(compute + comm, rel=1e-12)
    # a 2,048-token prompt among shorter ones: the ranks hold 2048 | 1024 x 3 | 512 + 512 x 4; the
    # long prompt's rank is the busiest (its squares 2048^2 against 2 x 512^2)
    lengths = [512] * 4 + [2048, 1024, 1024, 1024] + [512] * 4
    seconds, comm = prefill(np.array(lengths))
    compute = attention_seconds([2048]) + expert_seconds(sum(lengths), 8)
    assert comm == pytest.approx(all_to_alls(g, 2048), rel=1e-9)
    assert seconds == pytest.approx(compute + comm, rel=1e-12)


def test_the_event_loop_times_a_prefill_step_by_its_prompts(ep8):
    # one request of 4,096 tokens alone: its first token after the one-rank step, not the even split
    _, r = ep8
    assert r.ttft_p50 == pytest.approx(r.prefill_step(4096, 1)[0], rel=1e-12)
    assert r.ttft_p50 > 1.5 * r.prefill_step(4096, 8)[0]


def test_deal_longest_first_by_hand():
    # 5 4 3 3 3 on 2 ranks: 5 -> 0, 4 -> 1, 3 -> 1 (4 < 5), 3 -> 0 (5 < 7), 3 -> 1 (7 < 8)
    assert deal_longest_first([3, 5, 3, 4, 3], 2).tolist() == [1, 0, 0, 1, 1]
    assert deal_longest_first([2, 2], 2).tolist() == [0, 1]          # a tie: the lower rank first
    assert deal_longest_first([7, 1, 2], 1).tolist() == [0, 0, 0]
    assert deal_longest_first([2, 9], 8).tolist() == [1, 0]         # fewer prompts than ranks: one each


def test_decode_communication_is_the_busiest_ranks_tokens(ep8):
    """A decode step's calls carry the tokens of the attention rank holding the most sequences,
    ceil(b / ep) (its compute waits for that rank too), not b / ep: 9 sequences on 8 ranks put
    2 on one, which sends what 16 would; one sequence sends what 8 would."""
    _, r = ep8
    comm = {b: r.decode_step(b, 0.0)[1] for b in (1, 8, 9, 16)}
    assert comm[1] == comm[8] and comm[9] == comm[16]
    assert comm[9] > comm[8]
