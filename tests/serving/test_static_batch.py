"""A static batch (vLLM's benchmark_latency.py, TensorRT-LLM's static-batch tables): requests
arriving together are prefilled in one step, then decoded together. The reference: the step
tables' own prefill and decode steps summed by hand, as the engine runs them."""

import numpy as np
import pytest

import topologies as tp
from flowsolver import serve
from flowsolver.serving import simulate


@pytest.fixture(scope="module")
def run():
    with pytest.warns(RuntimeWarning):      # a 2 s run, read for its step tables
        return serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=2.0, prompt=128, output=32, tp=8)


def test_requests_arriving_together_are_prefilled_in_one_step():
    # the simulator prefilled the first of them alone, then the rest: a static batch's first
    # token came from a one-request prefill (serving_heldout's ttft rows read it)
    t = simulate(np.zeros(4), [100] * 4, [3] * 4, prefill_instances=1, decode_instances=0, max_seqs=8,
                 token_budget=1000, kv_capacity=10_000, prefill_time=lambda lengths: (0.1 * len(lengths), 0.0),
                 decode_time=lambda b, k: (0.5, 0.0))
    assert list(t.first_token) == [0.4] * 4          # one step of 4 prompts, 0.1 s each
    assert list(t.finish) == [1.4] * 4               # then two decode steps of the four


def test_a_static_batch_is_one_prefill_then_the_decode_steps(run):
    b, p, o = 16, 128, 32
    got = run.static_batch(b)
    prefill = run.prefill_step(b * p, b)[0]
    # decode step j (0-based) of the batch holds b x (p + j) tokens: the prompts and the j
    # tokens made since the first
    decode = sum(run.decode_step(b, b * (p + j))[0] for j in range(o - 1))
    assert got.waves == 1 and (got.batch, got.prompt, got.output, got.gpus) == (b, p, o, 8)
    assert got.ttft == pytest.approx(prefill, rel=1e-12)
    assert got.latency == pytest.approx(prefill + decode, rel=1e-12)
    assert got.tpot == pytest.approx(decode / (o - 1), rel=1e-12)
    assert got.throughput == pytest.approx(b * o / (prefill + decode), rel=1e-12)
    assert got.throughput_per_gpu == pytest.approx(got.throughput / 8, rel=1e-12)
    assert 0 < got.network_share < 1
    assert got.summary()["ttft_ms"] == pytest.approx(prefill * 1e3, rel=1e-12)


def test_other_lengths_and_waves(run):
    one = run.static_batch(1, prompt=2048, output=1)
    assert one.ttft == one.latency == pytest.approx(run.prefill_step(2048, 1)[0], rel=1e-12)
    assert np.isnan(one.tpot)
    # 8 prompts of 2,048 tokens exceed serve's token budget of 8,192: two prefill steps of 4
    two = run.static_batch(8, prompt=2048, output=4)
    assert two.waves == 2
    # the second waits for the first (prefill first: no decode step between them)
    assert two.ttft == pytest.approx(2 * run.prefill_step(4 * 2048, 4)[0], rel=1e-12)


def test_bad_input_is_refused(run):
    with pytest.raises(ValueError, match="batch must be an integer >= 1, got 0"):
        run.static_batch(0)
    with pytest.raises(ValueError, match="prompt must be an integer >= 1, got 1.5"):
        run.static_batch(4, prompt=1.5)
    with pytest.raises(ValueError, match="exceeds the KV cache"):
        run.static_batch(4, prompt=10**9)
    with pytest.warns(RuntimeWarning):
        ranged = serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=4.0, duration=1.0, prompt=(64, 256),
                       output=8, tp=8)
    with pytest.raises(ValueError, match="prompt must be given: this run's prompt lengths are not one value"):
        ranged.static_batch(4)
    assert ranged.static_batch(4, prompt=100).prompt == 100


def test_the_command_line_prints_the_static_batch(capsys, run):
    import json

    from flowsolver.cli import main

    argv = ["serve", "--nodes", "1", "--model", "llama-3-8b", "--tp", "8", "--batch", "16", "--prompt", "128",
            "--output", "32"]
    assert main(argv + ["--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    want = run.static_batch(16)          # the same cluster, model, layout and lengths through the API
    assert row["ttft_ms"] == pytest.approx(want.ttft * 1e3, rel=1e-9)
    assert row["latency_ms"] == pytest.approx(want.latency * 1e3, rel=1e-9)
    assert row["waves"] == 1 and row["gpus"] == 8
    assert main(argv) == 0
    assert "a static batch of 16 requests" in capsys.readouterr().out
    for bad, said in ((["--rate", "2"], "give one of --rate"), (["--prompt", "64:128"], "not a range"),
                      (["--max-rate", "--ttft-target", "100"], "--max-rate searches request rates")):
        assert main(argv + bad) == 2
        assert said in capsys.readouterr().err
    assert main(["serve", "--nodes", "1", "--tp", "8"]) == 2
    assert "give one of --rate" in capsys.readouterr().err


def test_serve_takes_a_model_file_as_train_does(tmp_path, capsys):
    # newuser22 F5: serve --model took presets only, train --model a file of the shape too
    import json

    from flowsolver import ModelSpec
    from flowsolver.cli import main

    shape = dict(layers=4, hidden=2048, ffn=8192, heads=16, kv_heads=4, vocab=32000)
    path = tmp_path / "small.json"
    path.write_text(json.dumps(shape))
    argv = ["serve", "--nodes", "1", "--model", str(path), "--tp", "2", "--batch", "8", "--prompt", "256",
            "--output", "16", "--json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    with pytest.warns(RuntimeWarning):
        r = serve(tp.rail_optimized(nodes=1), ModelSpec(name="small", **shape), rate=8.0, duration=1.0, prompt=256,
                  output=16, tp=2)
    assert row["latency_ms"] == pytest.approx(r.static_batch(8).latency * 1e3, rel=1e-9)
    assert main(["serve", "--nodes", "1", "--model", str(tmp_path / "none.json"), "--rate", "1"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_over_several_waves_tpot_is_the_requests_mean_not_the_last_ones():
    # adv23 F6: 257 requests on a 256-sequence engine read the 257th request's decode alone
    # (6.15 ms a token, against 18.7 for 256): tpot is each request's (finish - first token) /
    # (output - 1), averaged over the batch
    import warnings

    import flowsolver as fs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = fs.serve(tp.rail_optimized(nodes=1), "llama-3-8b", rate=1.0, duration=1.0, prompt=128, output=64, tp=1,
                     max_batch=256, token_budget=256 * 128)
    one, more = r.static_batch(256), r.static_batch(257)
    assert one.waves == 1 and more.waves == 2
    t = more.trace
    assert more.tpot == pytest.approx(float(np.mean((t.finish - t.first_token) / 63)), rel=1e-12)
    # every request of the first 256 decodes at least as slowly as in the batch of 256 alone
    assert more.tpot >= 255 / 257 * one.tpot
