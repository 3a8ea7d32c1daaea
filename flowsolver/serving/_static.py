"""A static batch on one serving instance: ``batch`` requests of equal lengths arriving together,
as vLLM's ``benchmark_latency.py`` and TensorRT-LLM's static-batch tables measure (every prompt
prefilled, then the batch decoded to its last token), on the step tables of a
:func:`flowsolver.serve` run."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import _checks
from ._steady import check_fits, run_engine

__all__ = ["StaticBatch", "static_batch"]


@dataclass(frozen=True)
class StaticBatch:
    """``batch`` requests of ``prompt`` and ``output`` tokens at t = 0 on one instance of
    ``gpus`` GPUs (seconds): ``ttft`` the batch's first token (the last request's: every prompt
    prefilled), ``tpot`` the mean over the requests of each one's time per output token after
    its first (``(finish - first token) / (output - 1)``; in one wave ``(latency - ttft) /
    (output - 1)``; NaN for one output token), ``latency`` the last token,
    ``throughput`` output tokens/s of the instance (``batch x output / latency``) and
    ``throughput_per_gpu`` that over its GPUs; ``network_share`` the communication of the steps
    the last request to finish went through over ``latency`` (in one wave, the batch's); ``waves`` the prefill steps the batch took (more than one where the prompts
    exceed serve's ``token_budget`` or the batch exceeds what the instance runs at once:
    ``max_batch x ep`` sequences, and the KV cache); ``trace`` the event trace per request."""

    batch: int
    prompt: int
    output: int
    gpus: int
    ttft: float
    tpot: float
    latency: float
    throughput: float
    throughput_per_gpu: float
    network_share: float
    waves: int
    trace: object = field(repr=False, default=None)

    def summary(self) -> dict:
        """The figures as a plain dict (ms for times)."""
        return dict(batch=self.batch, prompt=self.prompt, output=self.output, gpus=self.gpus,
                    ttft_ms=self.ttft * 1e3, tpot_ms=self.tpot * 1e3, latency_ms=self.latency * 1e3,
                    throughput_tokens_per_s=self.throughput, throughput_tokens_per_gpu=self.throughput_per_gpu,
                    network_share=self.network_share, waves=self.waves)


def static_batch(engine: dict, batch, prompt, output) -> StaticBatch:
    """The static batch on one instance of ``engine`` (serve's; disaggregated: one prefill and one
    decode instance). See :meth:`flowsolver.serving.ServeResult.static_batch`."""
    batch = _checks.integer("batch", batch)
    lengths = {}
    for name, value, spec in (("prompt", prompt, engine["prompt"]), ("output", output, engine["output"])):
        if value is None:
            if isinstance(spec, (tuple, list, np.ndarray)):
                raise ValueError(f"{name} must be given: this run's {name} lengths are not one value ({spec!r})")
            value = spec
        lengths[name] = _checks.integer(name, value)
    p, o = lengths["prompt"], lengths["output"]
    check_fits(engine, np.array([p]), np.array([o]))
    layouts = engine["layouts"]
    one = {"prefill_instances": layouts.get("colocated", layouts.get("prefill"))["pp"],
           "decode_instances": 0 if "colocated" in layouts else layouts["decode"]["pp"]}
    gpus = sum(v["tp"] * v["pp"] * v["ep"] for v in layouts.values())
    trace = run_engine({**engine, **one}, np.zeros(batch), np.full(batch, p), np.full(batch, o))
    ttft, latency = float(np.max(trace.first_token)), float(np.max(trace.finish))
    # each request's own decode: a request of a later wave decodes beside fewer others, and the
    # last one's alone is not the batch's (adv23 F6: 257 requests on a 256-sequence engine read
    # 6.15 ms a token, the last request's, against 18.7 for 256)
    tpot = float(np.mean((trace.finish - trace.first_token) / (o - 1))) if o > 1 else float("nan")
    last = int(np.argmax(trace.finish))     # one wave: every request went through the same steps
    comm = float(trace.ttft_network[last] + trace.decode_network[last])
    return StaticBatch(batch=batch, prompt=p, output=o, gpus=gpus, ttft=ttft, tpot=tpot, latency=latency,
                       throughput=batch * o / latency, throughput_per_gpu=batch * o / latency / gpus,
                       network_share=comm / latency, waves=len(np.unique(trace.first_token)), trace=trace)
