"""``flowsolver train``'s options: the cluster, the model (a preset or a file of its shape), the
parallel layout, the compute model and precision, recompute and routing."""

from __future__ import annotations

from ..routing import POLICIES
from ..training import MODELS, RECOMPUTE
from ._arguments import _EXAMPLES, _add_output, _add_topology, _int_or_auto, compute_model

def add_train(sub, fmt) -> None:
    """``flowsolver train``: one training step and its breakdown."""
    train = sub.add_parser("train", help="one training step: time, tokens/s, speed-up, overhead, breakdown",
                           epilog=_EXAMPLES, formatter_class=fmt)
    _add_topology(train)
    _add_output(train)
    train.add_argument("--model", default="llama-3-70b", metavar="PRESET|FILE",
                       help=f"model preset ({', '.join(MODELS)}; default %(default)s) or a .json / .toml file of "
                            "the model's shape: layers, hidden, ffn, heads, kv_heads, vocab, and optionally seq_len, "
                            "gated_mlp, experts, top_k, tied_embeddings")
    train.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default: the model's)")
    train.add_argument("--ranks", type=int, nargs="+", default=None,
                       help="placement: every GPU rank of the cluster, in the order the job's ranks take them "
                            "(TP fastest; default 0 1 2 ...)")
    for name, default, text in (("tp", 8, "tensor-parallel size"), ("pp", 1, "pipeline stages"),
                                ("dp", None, "data-parallel size (default: GPUs / (tp x pp))"),
                                ("ep", 1, "expert-parallel size"),
                                ("etp", None, "expert layers' tensor-parallel size: 1 (each expert whole on its GPU) "
                                 "or the tp (default: tp, Megatron-Core's)"), ("cp", 1, "context-parallel size"),
                                ("vp", 1, "virtual pipeline stages per stage (interleaved 1F1B); auto: the "
                                 "fastest of 1-8 that fits"),
                                ("global-batch", None, "sequences per step (default: 512 rounded to microbatches)"),
                                ("micro-batch", 1, "sequences per microbatch; auto: the fastest of 1, 2, 4, 8 that "
                                 "fits"), ("zero", 1, "ZeRO stage 0-3")):
        kind = _int_or_auto if name in ("vp", "micro-batch") else int
        train.add_argument(f"--{name}", type=kind, default=default,
                           help=text + ("" if default is None else " (default %(default)s)"))
    train.add_argument("--dp-overlap", type=float, default=1.0,
                       help="fraction of the compute windows the DP traffic may overlap (1: all of them; "
                            "what does not fit is exposed; default %(default)s)")
    train.add_argument("--tp-overlap", type=float, default=None,
                       help="fraction of the TP collectives hidden behind the GEMMs beside them, with sequence "
                            "parallelism (default: (tp - 1) / tp, Transformer Engine's userbuffers; 0: "
                            "Megatron's --tp-comm-overlap off)")
    train.add_argument("--tp-overlap-impl", default="te", choices=("te", "async"),
                       help="how the overlap runs: te (Transformer Engine's userbuffers, SMs held for the "
                            "communication; the default) or async (PyTorch's async TP: chunked GEMMs, no SMs held)")
    train.add_argument("--compute-efficiency", type=compute_model, default=None,
                       help="auto (the default: every kernel timed from published benchmarks where the GPU has "
                            "tables, else 0.44), kernels (the tables), or the flat model's fraction of the peak "
                            "the GEMMs reach")
    train.add_argument("--precision", default="bf16", choices=("bf16", "fp8"), help="GEMM precision (default %(default)s)")
    train.add_argument("--recompute", default="none", choices=RECOMPUTE,
                       help="activation recompute (default %(default)s, Megatron-Core's; selective: the core attention "
                            "run again in the backward; full: the whole layer; save_qkv_proj: MaxText's; "
                            "selective_op: torchtitan's)")
    train.add_argument("--gpu", default=None,
                       help="GPU type whose peak the compute runs at, a catalogue name such as h100_sxm or b200 "
                            "(default: the cluster's own; needed where its GPUs are of several types)")
    train.add_argument("--policy", default="ecmp", choices=POLICIES, help="routing policy (default %(default)s)")
