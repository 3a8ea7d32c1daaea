"""KV transfers of one prefill instance share its GPUs and NICs: they queue first in first out,
they never each run at the lone rate (adv14b finding 1); distinct instances get the wave's rate."""

import numpy as np
import pytest
import topologies as tp

import flowsolver as fs
from flowsolver.serving import simulate
from flowsolver.training import ModelSpec


def test_a_later_steps_transfer_waits_for_the_earlier_one_on_the_same_instance():
    # one prefill instance, one request a step (token_budget 4): r0 prefills 0 -> 1, r1 1 -> 2. 4 bytes a
    # cache at 1 s a byte for one sending instance (kv_seconds(b, m) = b x m: m instances would be slower).
    # By hand: r0's cache leaves 1 -> 5; r1's waits for it on the same GPU, 5 -> 9 (7 s after its step),
    # sent while one instance sends. It ran 2 -> 10 (as if a second instance sent beside the first).
    t = simulate([0.0, 0.1], [4, 4], [2, 2], prefill_instances=1, decode_instances=1, max_seqs=4, token_budget=4,
                 kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0), decode_time=lambda b, k: (0.5, 0.0),
                 kv_seconds=lambda nbytes, n: nbytes * n, kv_bytes_per_token=1.0)
    np.testing.assert_allclose(t.first_token, [1.0, 2.0])
    np.testing.assert_allclose(t.kv_seconds, [4.0, 7.0])
    np.testing.assert_allclose(t.finish, [5.5, 9.5])           # each joins the decode batch as its cache lands


def test_distinct_instances_sending_at_once_get_the_waves_rate():
    # two prefill instances end their steps together at t = 1: the first to send is alone (4 s), the
    # second sends while the first still does: two instances, 2 s a byte, 8 s
    t = simulate([0.0, 0.0], [4, 4], [2, 2], prefill_instances=2, decode_instances=1, max_seqs=4, token_budget=4,
                 kv_capacity=100, prefill_time=lambda lengths: (1.0, 0.0), decode_time=lambda b, k: (0.5, 0.0),
                 kv_seconds=lambda nbytes, n: nbytes * n, kv_bytes_per_token=1.0)
    np.testing.assert_allclose(t.kv_seconds, [4.0, 8.0])


@pytest.fixture(scope="module")
def mha_overload():
    # Llama 2 7B's shape (MHA: 32 KV heads, 512 KiB of cache a token), prefill on GPU 0, decode on GPU 8 of
    # two DGX H100 on HDR InfiniBand (one 200 Gb/s NIC a GPU): 1024-token prompts at 47 requests/s offer
    # 47 x 1024 x 524,288 B = 25.2 GB/s of KV cache, more than the NIC's 25 GB/s
    m = ModelSpec(name="mha-7b", layers=32, hidden=4096, ffn=11008, heads=32, kv_heads=32, vocab=32000, seq_len=4096,
                  gated_mlp=True)
    g = tp.rail_optimized(nodes=2, server="dgx_h100", link="ib_hdr")
    r = fs.serve(g, m, rate=47.0, duration=6.0, prompt=1024, output=8, tp=1, prefill_gpus=1, ranks=[0, 8],
                 token_budget=2048)
    return g, r


def test_bytes_leaving_the_prefill_gpu_never_exceed_its_nic(mha_overload):
    g, r = mha_overload
    nic = min(d["capacity"] for _, _, d in g.edges(data=True) if d["tier"] == "access")
    assert nic == pytest.approx(200e9 / 8)                     # 200 Gb/s HDR
    per_token = 2 * 32 * 32 * 128 * 2                          # K and V x layers x KV heads x head dim x 2 bytes
    assert r.engine["kv_bytes_per_token"] == per_token
    nbytes = per_token * r.prompt.astype(float)
    lone = r.engine["kv_seconds"](1.0, 1)                      # s a byte, the instance alone
    assert 1.0 / lone <= nic                                   # its own rate is within the NIC
    done = r.arrival + r.ttft + r.kv_seconds                   # each cache's last byte
    sending = np.sort(np.stack([done - nbytes * lone, done], axis=1), axis=0)
    # one GPU's caches are on the wire one at a time: the intervals do not overlap (so the bytes/s leaving
    # the NIC are at most 1 / lone); they overlapped up to 3 deep (72 GB/s on the 25 GB/s link)
    assert np.all(sending[1:, 0] >= sending[:-1, 1] - 1e-9)
    # and the arrivals are the FIFO queue worked out by hand: each step's caches after the step before's
    step_end = r.arrival + r.ttft
    ends = np.unique(step_end)
    free, expected = -np.inf, {}
    for s in ends:
        free = max(free, s) + nbytes[step_end == s].sum() * lone
        expected[s] = free - s
    assert max(r.kv_seconds[step_end == s].max() for s in ends) == pytest.approx(max(expected.values()), rel=1e-9)
    np.testing.assert_allclose([r.kv_seconds[step_end == s].max() for s in ends], [expected[s] for s in ends],
                               rtol=1e-9)
