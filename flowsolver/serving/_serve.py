"""serve: a request stream served on a cluster graph, co-located or disaggregated."""

from __future__ import annotations

import numpy as np

import topologies as tp_

from .. import _checks
from ..collectives import checked_collective_options
from ..training import (DEFAULT_ATTENTION_EFFICIENCY, get_model, kernel_tables_missing,
                        resolve_compute)
from ._kv import kv_transfer
from ._memory import checked_accounting, kv_capacity
from ._result import ServeResult, _result, request_stream
from ._steady import check_fits, spec_bounds
from ._steps import WEIGHT_BYTES, InstanceLayout, StepModel, comm_table, size_grid

__all__ = ["serve", "DEFAULT_MEMORY_UTILIZATION", "KV_BYTES_MIN"]

# Share of each GPU's memory the server may fill with weights and KV cache: vLLM's default
# gpu_memory_utilization = 0.9 (vLLM engine arguments, docs.vllm.ai "Engine Arguments",
# --gpu-memory-utilization, "default: 0.9").
DEFAULT_MEMORY_UTILIZATION = 0.9

# The fewest bytes a cached key or value element can take: one bit. The most compressed KV
# caches published keep about that much (Zhang et al., "KV Cache is 1 Bit Per Channel:
# Efficient Large Language Model Inference with Coupled Quantization", NeurIPS 2024, arXiv
# 2405.03917: coupled quantization down to 1 bit a value); what serving engines ship is 1 byte
# (vLLM's --kv-cache-dtype fp8) or 2 (bf16, the default here).
KV_BYTES_MIN = 1.0 / 8.0

_OPS = {"tp": "all_reduce", "ep": "all_to_all", "pp": "send_recv"}


def _pool(name, spec, ranks, model) -> InstanceLayout:
    spec = dict(spec)
    unknown = set(spec) - {"tp", "pp", "ep"}
    if unknown:
        raise ValueError(f"{name} takes keys tp, pp, ep, got {sorted(unknown)}")
    tp, pp, ep = (_checks.integer(f"{name}['{k}']" if name != "layout" else k, spec.get(k, 1))
                  for k in ("tp", "pp", "ep"))
    size = tp * pp * ep
    if len(ranks) % size:
        raise ValueError(f"{name}: tp * pp * ep = {size} must divide its {len(ranks)} GPUs")
    if ep > 1 and (model.experts == 1 or model.experts % ep):
        raise ValueError(f"{name}: ep ({ep}) needs a mixture-of-experts model whose experts it divides; "
                         f"{model.name} has {model.experts}")
    if model.layers % pp:
        raise ValueError(f"{name}: pp ({pp}) must divide the model's {model.layers} layers")
    # vLLM's rule (vllm/config ModelConfig.verify_with_parallel_config: heads % tp; QKVParallelLinear in
    # vllm/model_executor/layers/linear.py: divide(kv_heads, tp), else divide(tp, kv_heads) replicas)
    if model.heads % tp or (model.kv_heads % tp and tp % model.kv_heads):
        raise ValueError(f"{name}: tp ({tp}) must divide the {model.heads} attention heads of {model.name}, and "
                         f"divide or be a multiple of its {model.kv_heads} KV heads (each TP rank holds whole heads)")
    return InstanceLayout(tp=tp, pp=pp, ep=ep, ranks=tuple(ranks))


def _step_functions(graph, sm: StepModel, max_seqs: int, max_tokens: int, a2a_bytes: float, options: dict,
                    overlap: float = 0.0, first: int | None = None):
    """decode_time(batch, context) and prefill_time(lengths of the step's prompts) of one
    pool's instance, (seconds, exposed communication seconds); its communication tables.
    ``overlap`` of each step's communication hides behind its compute (at most all of it).
    ``max_seqs``: the most sequences a decode step can hold; the decode table is built for
    batches up to ``first`` (default ``max_seqs``) and grows (doubling, at most to ``max_seqs``)
    when a larger batch is asked for; ``decode_time.built()`` is the largest batch it holds."""
    lay, m = sm.layout, sm.model
    kinds = {k: _OPS[k] for k, deg in (("tp", lay.tp), ("ep", lay.ep), ("pp", lay.pp)) if deg > 1}
    smallest = min(sm.tp_bytes(1) if lay.tp > 1 else np.inf, sm.ep_bytes(1, a2a_bytes) if lay.ep > 1 else np.inf,
                   sm.pp_bytes(1) if lay.pp > 1 else np.inf)
    # the tables reach the largest call of every kind: a decode batch of max_seqs, a prefill of
    # max_tokens (per attention rank at most either; an all-to-all's call may exceed the all-reduce's)
    most = float(max(max_tokens, max_seqs))
    largest = max(sm.tp_bytes(most) if lay.tp > 1 else 0.0, sm.ep_bytes(most, a2a_bytes) if lay.ep > 1 else 0.0,
                  sm.pp_bytes(most) if lay.pp > 1 else 0.0)
    table = comm_table(graph, lay, kinds, size_grid(smallest, largest), options) if kinds else None
    moe_layers = m.layers if m.experts > 1 else 0

    def comm(tokens_per_rank):
        if table is None:
            return np.zeros_like(np.asarray(tokens_per_rank, dtype=np.float64))
        return (2 * m.layers * table.time("tp", sm.tp_bytes(tokens_per_rank))
                + 2 * moe_layers * table.time("ep", sm.ep_bytes(tokens_per_rank, a2a_bytes))
                + (lay.pp - 1) * table.time("pp", sm.pp_bytes(tokens_per_rank)))

    per_context_bytes = sm.kv_read_bytes(1.0)
    per_context_flops = sm.decode_flops(0.0, 1.0)
    rate = sm._peak * sm.compute_efficiency if sm.kernels is None else None
    tab = {}

    def build(upto):
        """The decode table for batches 0 ... ``upto``."""
        n = np.arange(upto + 1)
        # the busiest attention rank holds whole sequences, ceil(b / ep) of the b (one sequence on
        # 8 ranks is on one, not 1/8 on each), and their share of the context; the step waits for it
        busiest = np.ceil(n / lay.ep)
        tab["share"] = busiest / np.maximum(n, 1)
        tab["comm"] = comm(busiest)     # its tokens, as prefill's: the rank holding the most sends the most
        tab["comm"][0] = 0.0
        if sm.kernels is not None:      # the kernel tables: each kernel timed alone, the KV reads apart
            tab["fixed"] = np.array([sm.kernels.decode_fixed(b, k) for k, b in enumerate(busiest)])
        else:
            batches = n.astype(np.float64) / lay.ep      # per attention rank
            tab["weights"] = np.array([sm.weight_bytes(b * lay.ep) for b in batches])
            tab["flops"] = np.array([sm.decode_flops(b, 0.0) for b in busiest])

    if sm.kernels is not None:
        def compute_time(b, mine):
            return tab["fixed"][b] + sm.kernels.decode_context(mine)
    else:
        def compute_time(b, mine):
            return max((tab["weights"][b] + per_context_bytes * mine) / sm.hbm_bandwidth,
                       (tab["flops"][b] + per_context_flops * mine) / rate)

    def decode_time(batch, context):
        b = int(batch)
        if b >= len(tab["share"]):
            if b > max_seqs:
                raise ValueError(f"a decode batch of {b} sequences: the instance runs at most {max_seqs} at once")
            build(min(max_seqs, max(b, 2 * (len(tab["share"]) - 1))))
        compute = compute_time(b, context * tab["share"][b])
        net = float(tab["comm"][b])
        exposed = net - min(overlap * net, compute)
        return compute + exposed, exposed

    build(max_seqs if first is None else max(1, min(first, max_seqs)))
    decode_time.built = lambda: len(tab["share"]) - 1

    def prefill_time(lengths):
        # as prefill_step(0) is refused: no prompt, or one of no tokens, is no prefill step
        lengths = np.asarray(lengths, dtype=np.float64)
        if lengths.ndim != 1 or not len(lengths) or not np.all(lengths >= 1.0):     # NaN fails >= too
            raise ValueError(f"lengths must be a non-empty 1-D list of prompt lengths >= 1 token, got "
                             f"{np.array2string(lengths, threshold=8)}")
        compute, busiest = sm.prefill_step(lengths)
        net = float(comm(busiest))          # the rank holding the most tokens sends and all-reduces the most
        exposed = net - min(overlap * net, compute)
        return compute + exposed, exposed

    return decode_time, prefill_time, table


def background_flows(pools: dict, models: dict, tables: dict, *, rate: float, prompt: float, output: float,
                     token_budget: int, max_batch: int, capacity: float, a2a_bytes: float) -> tuple:
    """The pools' own communication as flows ``(src, dst, bytes/s)`` for the KV-transfer solve:
    each pool at the load the stream offers it, ``u = min(1, offered tokens/s / the pool's
    tokens/s at a full step)`` (prefill: as many whole prompts of the mean length as fit
    ``token_budget``, at least one; decode:
    ``max_batch x ep`` sequences, the most it runs at once, holding the mean prompt and half the
    mean output each), its
    TP rings (``2 x layers`` all-reduces, ``2 (tp - 1) / tp`` of the buffer to the ring's next
    GPU), EP all-to-alls (``2 x layers`` calls, ``1 / ep`` of the buffer to each peer) and PP
    sends of a full step, each flow at ``u x`` its bytes per step over the step's time."""
    src, dst, rates = [], [], []
    for name, lay in pools.items():
        sm, (decode_time, prefill_time) = models[name], tables[name]
        m = sm.model
        if name == "prefill":
            lengths = np.full(max(1, int(token_budget // prompt)), prompt)     # the whole prompts a step fits
            tokens = float(lengths.sum())
            step = prefill_time(lengths)[0]
            load = rate * prompt / (lay.instances * lay.pp * tokens / step)
        else:
            seqs = max_batch * lay.ep
            tokens = float(seqs)
            step = decode_time(seqs, min(seqs * (prompt + output / 2.0), capacity))[0]
            load = rate * output / (lay.instances * lay.pp * seqs / step)
        share = min(1.0, load) / step
        per_rank = tokens / lay.ep
        moe_layers = m.layers if m.experts > 1 else 0
        if lay.tp > 1:
            ring = 2 * m.layers * 2.0 * (lay.tp - 1) / lay.tp * sm.tp_bytes(per_rank)
            for g in lay.groups("tp"):
                src += g
                dst += g[1:] + g[:1]
                rates += [ring * share] * len(g)
        if lay.ep > 1 and moe_layers:
            pair = 2 * moe_layers * sm.ep_bytes(per_rank, a2a_bytes) / lay.ep
            for g in lay.groups("ep"):
                for a in g:
                    for b in g:
                        if a != b:
                            src.append(a)
                            dst.append(b)
                            rates.append(pair * share)
        if lay.pp > 1:
            for a, b in lay.groups("pp"):
                src.append(a)
                dst.append(b)
                rates.append(sm.pp_bytes(per_rank) * share)
    keep = [i for i, r in enumerate(rates) if r > 0]
    return (np.array([src[i] for i in keep], dtype=np.int64), np.array([dst[i] for i in keep], dtype=np.int64),
            np.array([rates[i] for i in keep], dtype=np.float64))


def _least(spec) -> int:
    """The fewest tokens a length spec of :func:`request_stream` draws (int, ``(lo, hi)`` or samples)."""
    return spec_bounds(spec)[0]


def _most(spec) -> int:
    """The most tokens a length spec of :func:`request_stream` can draw: the value, ``hi`` of
    ``(lo, hi)``, the largest sample (whatever one run drew)."""
    return spec_bounds(spec)[1]


def serve(graph, model="llama-3-70b", *, rate: float, duration: float = 60.0, prompt=1024, output=256,
          tp: int = 8, pp: int = 1, ep: int = 1, prefill_gpus: int | None = None, decode: dict | None = None,
          ranks=None, max_batch: int = 256, token_budget: int = 8192, precision: str = "bf16",
          kv_bytes: float | None = None, a2a_bytes: float | None = None,
          compute_efficiency="auto", attention_efficiency: float | None = None,
          hbm_efficiency: float | None = None,
          memory_utilization: float = DEFAULT_MEMORY_UTILIZATION, memory_accounting: str = "vllm",
          ttft_target: float | None = None,
          tpot_target: float | None = None, comm_overlap: float = 0.0, gpu=None, seed: int = 0,
          collective_options=None) -> ServeResult:
    """Serve a Poisson request stream with ``model`` on the cluster ``graph``.

    Co-located (default): every GPU of ``ranks`` (default all) belongs to instances of ``tp x
    pp x ep`` GPUs that prefill and decode. An instance of ``pp`` stages keeps ``pp`` batches
    in flight (vLLM's virtual engines): ``pp`` engines, each with ``1 / pp`` of the KV cache,
    each step crossing every stage in turn (in steady state they take the stages in turn).
    Disaggregated (``prefill_gpus``): the first ``prefill_gpus`` of ``ranks`` prefill with
    ``tp, pp, ep``, the rest decode with
    ``decode`` (``dict(tp=, pp=, ep=)``; a degree it leaves out, or all without it, the prefill
    pool's: ``decode=dict(tp=2)`` keeps ``pp`` and ``ep``), and every request's KV cache
    crosses the fabric between them. Step times come from the model's FLOPs and bytes
    (:mod:`flowsolver.serving._steps`), communication from the collectives solved on
    ``graph``, KV transfers from max-min fair flows (:mod:`flowsolver.serving._kv`), the
    queueing from a discrete-event simulation with continuous batching
    (:mod:`flowsolver.serving._events`).

    Parameters
    ----------
    graph : networkx.DiGraph
        A cluster.
    model : str or ModelSpec
        A preset of ``flowsolver.MODELS`` or a shape.
    rate : float
        Requests per second (Poisson).
    duration : float
        Seconds of arrivals; every request is run to completion.
    prompt, output : int, tuple or list
        Tokens per request: fixed, ``(lo, hi)`` uniform, or samples drawn with replacement.
    tp, pp, ep : int
        Instance layout (of the prefill pool when disaggregated): tensor parallel, pipeline
        stages, attention-data-parallel ranks sharing the experts (``ep`` divides the experts).
    max_batch : int
        Sequences per attention rank in a step (an instance runs ``ep x max_batch``).
    token_budget : int
        Prompt tokens per prefill step of an instance (a longer prompt runs alone): vLLM's
        ``max_num_batched_tokens``, TensorRT-LLM's ``max_num_tokens``. The peak activation of a
        step of that many tokens (or of the longest prompt ``prompt`` allows, where that is more:
        it runs as one step) comes out of the KV cache, as both engines' profiling takes it out
        (vLLM without chunked prefill requires ``max_num_batched_tokens >= max_model_len``;
        ``memory_utilization`` below).
    precision : {"bf16", "fp8"}
        Weights and GEMMs; ``kv_bytes`` (bytes per cached key or value element, default 2, at
        least 1/8: one bit, :data:`KV_BYTES_MIN`) and ``a2a_bytes`` (bytes per value in the EP
        dispatch / combine, default 2).
    compute_efficiency : "auto", None or float in (0, 1]
        The compute model, as :func:`flowsolver.training_step` takes it: ``"auto"`` (default)
        the kernel tables where the GPU has them (``None``: every kernel of a step timed from
        published GEMM, attention and memory benchmarks, :mod:`flowsolver.serving._kernel_steps`),
        else the flat model; a fraction: the flat model, the GEMMs at that share of the
        precision's peak and a step no faster than its bytes at the achieved HBM bandwidth.
    attention_efficiency : float in (0, 1], optional
        Fraction of the bf16 peak prefill's attention reaches (default: the kernel tables' flash
        attention rates with the kernel tables, the training model's 0.62 with the flat model).
    hbm_efficiency : float in (0, 1], optional
        Fraction of the datasheet HBM bandwidth reached by the weight, KV-cache and memory-bound
        traffic (default: BabelStream Triad's, :func:`flowsolver.training._kernels.memory_fraction`).
    memory_utilization : float in (0, 1]
        The engine's memory fraction (default vLLM's 0.9), read as ``memory_accounting`` says.
        The KV cache is what is left after the weights, the peak activation of a prefill step of
        ``token_budget`` tokens and the runtime's memory outside tensors (CUDA context,
        libraries, NCCL buffers: :data:`flowsolver.serving._memory.RUNTIME_BYTES`, measured by
        the engines' own logs) are taken out (:mod:`flowsolver.serving._memory`).
    memory_accounting : {"vllm", "trtllm"}
        Whose fraction ``memory_utilization`` is. ``"vllm"`` (default): vLLM's
        ``gpu_memory_utilization``, a share of the TOTAL memory that the weights, activation and
        runtime memory come out of (``Worker.determine_available_memory``,
        vllm/v1/worker/gpu_worker.py: ``total_gpu_memory x gpu_memory_utilization -
        peak_memory``). ``"trtllm"``: TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction``, a share
        (below 1) of the memory left FREE once they are allocated (``KvCacheCreator.
        _cal_max_tokens``: ``(total_gpu_memory - peak_memory + ...) x fraction``; its default
        0.9 is ``memory_utilization=0.9`` here). At 0.9 and 10 GB left after them on an 80 GB
        GPU, vLLM's KV cache is 2 GB, TensorRT-LLM's 9 GB.
    ttft_target, tpot_target : float, optional
        Latency targets (s) for ``goodput``.
    comm_overlap : float in [0, 1]
        Share of each step's communication hidden behind its compute (at most the compute):
        0 (default) none; DeepSeek's two-microbatch pipelines hide most of it. The network
        shares count the exposed part.
    collective_options : CollectiveOptions or dict, optional
        Options of :func:`flowsolver.concurrent_kinds` (``policy``, ``efficiency``, ...;
        ``protocol`` defaults to ``"auto"``, NCCL's choice per size), as
        :func:`flowsolver.training_step` takes them: a :class:`flowsolver.CollectiveOptions`
        (without ``channels`` or ``candidates``) or a dict of its fields.

    Examples
    --------
    >>> import topologies as tp
    >>> g = tp.rail_optimized(nodes=2)
    >>> r = serve(g, "llama-3-8b", rate=20.0, duration=5.0, prompt=512, output=64, tp=2)
    >>> r.mode, r.gpus, r.completed == len(r.arrival), 0 < r.tpot_p50 < 0.05
    ('colocated', 16, True, True)
    """
    spec = get_model(model)
    _checks.checked_graph(graph)
    if precision not in WEIGHT_BYTES:
        raise ValueError(f"precision must be one of {', '.join(WEIGHT_BYTES)}, got {precision!r}")
    from ..training import checked_gpu
    gpu_spec = checked_gpu(graph, gpu)
    if precision == "fp8" and not gpu_spec.peak_fp8_flops > 0:
        raise ValueError(f"precision='fp8' needs a GPU with FP8 tensor cores; {gpu_spec.name} has none")
    if not gpu_spec.hbm_bandwidth > 0:
        raise ValueError(f"gpu {gpu_spec.name!r} has no HBM bandwidth (hbm_bandwidth = 0): pass a GpuSpec with one")
    if hbm_efficiency is None:
        from ..training import memory_fraction
        try:
            hbm_efficiency = memory_fraction(gpu_spec)
        except ValueError as err:
            raise ValueError(f"{err}: pass hbm_efficiency=") from None
    hbm_efficiency = _checks.fraction("hbm_efficiency", hbm_efficiency, zero_ok=False)
    compute_efficiency = resolve_compute(compute_efficiency, gpu_spec, precision)   # "auto": flat without tables
    if compute_efficiency is None:
        why = kernel_tables_missing(gpu_spec, precision)
        if why:
            raise ValueError(f"compute_efficiency=None needs the kernel tables: GPU {gpu_spec.name!r} {why}; "
                             f"pass a fraction (the flat model) or 'auto'")
    if attention_efficiency is None and compute_efficiency is not None:
        attention_efficiency = DEFAULT_ATTENTION_EFFICIENCY
    if attention_efficiency is not None:
        attention_efficiency = _checks.fraction("attention_efficiency", attention_efficiency, zero_ok=False)
    memory_utilization = _checks.fraction("memory_utilization", memory_utilization, zero_ok=False)
    memory_accounting = checked_accounting(memory_accounting)
    if memory_accounting == "trtllm" and not memory_utilization < 1.0:
        raise ValueError(f"memory_utilization is TensorRT-LLM's kv_cache_free_gpu_mem_fraction with "
                         f"memory_accounting='trtllm' and must be below 1 (its freeMemFraction < 1.0 check), "
                         f"got {memory_utilization!r}")
    comm_overlap = _checks.fraction("comm_overlap", comm_overlap, zero_ok=True)
    kv_bytes = 2.0 if kv_bytes is None else _checks.positive_number("kv_bytes", kv_bytes, "bytes")
    if kv_bytes < KV_BYTES_MIN:          # 1e-9 gave 9e15 tokens of KV cache a rank
        raise ValueError(f"kv_bytes must be at least {KV_BYTES_MIN} bytes (1 bit) per cached key or value element "
                         f"(1-bit KV quantization is the least published; fp8 is 1, bf16 2), got {kv_bytes!r}")
    a2a_bytes = 2.0 if a2a_bytes is None else _checks.positive_number("a2a_bytes", a2a_bytes, "bytes")
    max_batch = _checks.integer("max_batch", max_batch)
    token_budget = _checks.integer("token_budget", token_budget)
    for name, target in (("ttft_target", ttft_target), ("tpot_target", tpot_target)):
        if target is not None:
            _checks.positive_number(name, target, "s")
    all_ranks = list(range(len(tp_.gpus(graph)))) if ranks is None else _checks.distinct_ranks(graph, ranks)
    if prefill_gpus is None:
        if decode is not None:
            raise ValueError("decode= is the decode pool's layout: it needs prefill_gpus= (disaggregated)")
        pools = {"colocated": _pool("layout", dict(tp=tp, pp=pp, ep=ep), all_ranks, spec)}
    else:
        prefill_gpus = _checks.integer("prefill_gpus", prefill_gpus, maximum=len(all_ranks) - 1)
        pools = {"prefill": _pool("layout", dict(tp=tp, pp=pp, ep=ep), all_ranks[:prefill_gpus], spec),
                 # a degree decode= leaves out is the prefill pool's (as the CLI's --decode-tp)
                 "decode": _pool("decode", dict(tp=tp, pp=pp, ep=ep) | dict(decode or {}), all_ranks[prefill_gpus:],
                                 spec)}
    arrival, prompt_t, output_t = request_stream(rate, duration, prompt, output, seed=seed)
    if spec.context is not None and _most(prompt) + _most(output) > spec.context:     # as vLLM's max_model_len
        raise ValueError(f"prompt= (up to {_most(prompt)} tokens) + output= (up to {_most(output)}) = "
                         f"{_most(prompt) + _most(output)} tokens is beyond {spec.name}'s context of {spec.context} "
                         f"tokens (ModelSpec.context, its max_position_embeddings): shorten prompt= or output= (or "
                         f"pass a ModelSpec with a longer context, dataclasses.replace of it with context=...)")
    if not len(arrival):
        raise ValueError(f"rate x duration = {rate * duration:g} requests drew none (seed {seed}): raise rate or "
                         f"duration")
    # NCCL chooses its protocol per size (LL for the small messages of decode steps); a
    # CollectiveOptions or a dict, checked as training_step checks them (a ValueError names the key)
    try:
        options = {"protocol": "auto"} | checked_collective_options(collective_options, graph)
    except ValueError as err:
        raise ValueError(str(err).replace("a training step", "serve")) from None
    # the prefill tables reach the longest prompt the spec allows, not this stream's longest draw:
    # at_rate and rate_at_targets draw other streams of the same spec
    longest = max(token_budget, _most(prompt))

    models = {name: StepModel(spec, gpu_spec, lay, precision, kv_bytes, compute_efficiency, attention_efficiency,
                              gpu_spec.hbm_bandwidth * hbm_efficiency) for name, lay in pools.items()}
    first = next(iter(models.values()))
    # each pool admits against its own KV cache (a prefill pool's instances hold a step's prompts,
    # a decode pool's whole sequences; tokens an attention rank), its own max_batch x ep sequences
    # the peak step: token_budget tokens, or the longest prompt where that is more (it runs alone, one
    # step; adv23 F2: a 100,000-token prompt at token_budget 512 kept a 512-token step's activation)
    capacities = {name: float(kv_capacity(sm, memory_utilization, longest, memory_accounting))
                  for name, sm in models.items()}
    seqs = {name: max_batch * lay.ep for name, lay in pools.items()}
    decoding = "colocated" if "colocated" in pools else "decode"
    first_pool = next(iter(pools))
    limits = dict(capacity=capacities[first_pool], max_seqs=seqs[first_pool], kv_ranks=pools[first_pool].ep,
                  decode_capacity=capacities[decoding], decode_max_seqs=seqs[decoding],
                  decode_ranks=pools[decoding].ep, kv_capacities=capacities)
    check_fits(limits, prompt_t, output_t)          # raises, naming the request, the pool and its capacity
    # the most sequences a pool's instance runs at once, whatever the stream (at_rate draws others
    # of the same lengths): max_batch x ep, and no more whole requests of the least length (a prefill
    # pool's: prompt; else prompt + output) than its ranks' caches hold; the decode tables are built
    # for as many as this stream has requests and grow to that when asked
    least = {name: _least(prompt) + (0 if name == "prefill" else _least(output)) for name in pools}
    at_once = {name: min(seqs[name], pools[name].ep * int(capacities[name] // least[name])) for name in pools}
    tables, bottleneck = {}, {}
    for name, sm in models.items():
        dec_t, pre_t, table = _step_functions(graph, sm, at_once[name], longest, a2a_bytes, options, comm_overlap,
                                              first=len(arrival))
        tables[name] = (dec_t, pre_t)
        if table is not None:
            for kind, links in table.bottleneck.items():
                bottleneck[f"{name}.{kind}"] = links
    engine = dict(mode="colocated" if "colocated" in pools else "disaggregated", gpus=len(all_ranks),
                  **limits, decode_at_once=at_once[decoding], token_budget=token_budget, prompt=prompt, output=output,
                  model=spec.name, context=spec.context,
                  bottleneck=bottleneck, kv_bytes_per_token=first.kv_bytes_per_token,
                  layouts={name: dict(tp=lay.tp, pp=lay.pp, ep=lay.ep, instances=lay.instances)
                           for name, lay in pools.items()})
    if "colocated" in pools:
        lay = pools["colocated"]
        engine.update(prefill_instances=lay.instances * lay.pp, decode_instances=0,
                      decode_time=tables["colocated"][0], prefill_time=tables["colocated"][1], kv_seconds=None)
    else:
        background = background_flows(pools, models, tables, rate=rate, prompt=float(np.mean(prompt_t)),
                                      output=float(np.mean(output_t)), token_budget=token_budget,
                                      max_batch=at_once["decode"] // pools["decode"].ep,     # a full step
                                      capacity=capacities["decode"] * pools["decode"].ep,
                                      a2a_bytes=a2a_bytes)
        kv = kv_transfer(graph, pools["prefill"], pools["decode"], spec.kv_heads,
                         policy=options.get("policy", "ecmp"), pxn=options.get("pxn", True),
                         efficiency=options.get("efficiency"), background=background)
        if np.max(output_t) > 1:        # a request of one output token ends at the prefill: no decode, no transfer
            bottleneck["kv"] = kv.bottleneck
        else:
            bottleneck = {k: v for k, v in bottleneck.items() if not k.startswith("decode.")}
            engine["bottleneck"] = bottleneck
        engine.update(prefill_instances=pools["prefill"].instances * pools["prefill"].pp,
                      decode_instances=pools["decode"].instances * pools["decode"].pp,
                      decode_time=tables["decode"][0],
                      prefill_time=tables["prefill"][1], kv_seconds=kv.seconds)
    return _result(engine, (arrival, prompt_t, output_t), duration=float(duration), rate=rate, ttft_target=ttft_target,
                   tpot_target=tpot_target)
