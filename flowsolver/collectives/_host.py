"""The host's floor under a collective when one thread drives several GPUs (units: seconds).

nccl-tests run with ``-g N`` (``src/common.cu``, ``startColl``) has one thread issue, per
iteration, ``ncclGroupStart``, one ``ncclAllReduce`` (or other collective) per GPU's
communicator and ``ncclGroupEnd``; NCCL's group launch then plans and launches the N kernels
one communicator after another on that thread (``src/group.cc``: ``groupLaunch`` prepares and
enqueues each communicator's tasks, ``doLaunches`` loops over them, ``ncclLaunchPrepare`` and
``ncclLaunchKernel`` each). ``BenchTime`` queues its iterations without waiting and divides
the wall time of all of them by their count, so the host's work for an iteration runs while
the GPUs run the previous one: an iteration takes ``max(GPU time, N x per-call host cost)``,
the slower of the two stages, not their sum. With one process or thread per GPU (MPI,
torchrun: ``-g 1``) the host's single call hides behind the kernel, and NCCL's latencies,
measured that way, already hold it: no floor.

nccl-tests run with ``-G N`` (``graph: N`` in its header; ``BenchTime``) captures the
iterations' calls into a CUDA graph per GPU before the timer starts and times only ``N``
``cudaGraphLaunch`` of it per GPU, dividing by the iterations and launches: NCCL's planning and
launch of each call ran during the capture, outside the timed loop, so a ``-g`` run under a graph
has no host floor (:func:`log_gpus_per_thread`).

A call timed on its own from an idle device (an event recorded, the call issued, an event
recorded, the device synchronised) takes the host's work for the call *and* the kernel, one
after the other: nothing queued ahead hides the host. ``CollectiveOptions.host_overhead`` adds
it; :data:`TORCH_CALL_OVERHEAD` is PyTorch's, for ``torch.distributed`` calls timed that way.
"""

from __future__ import annotations

__all__ = ["HOST_CALL", "TORCH_CALL_OVERHEAD", "host_floor", "log_gpus_per_thread", "with_host"]

#: seconds of host work per NCCL collective call of a group (planning and kernel launch), from
#: nccl-tests issue #123 (NVIDIA/nccl-tests, 2022-12-14): ``NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=1
#: all_reduce_perf -b 8 -e 128 -g N`` on a DGX A100 took 10.0, 13.76, 16.88, 20.8, 25.2, 29.5,
#: 33.7 us for N = 2 ... 8, rising 4 us per GPU where the GPUs' own ring LL time (NCCL's model:
#: 6.6 + 2 (N - 1) x 0.6 us) rises 1.2 us; the least-squares line through the origin is
#: 4.24 us per GPU. Not fitted on the validation corpus: only two of its sources run ``-g``
#: at small sizes, and a fit leaving each source out gives 4.3-7.2 us (soft-L1 of the log
#: error) and a held-out median of 14.6 % against this figure's 12.0 % (docs' accuracy page).
HOST_CALL = 4.2e-6

#: seconds of host work between recording an event and a ``torch.distributed.all_reduce``'s NCCL
#: kernel starting (ProcessGroupNCCL's work object, stream events, NCCL's enqueue and launch):
#: "PyTorch's per-call host overhead of some 20-30us" (stas00/ml-engineering,
#: network/benchmarks/all_reduce_bench.py docstring, revision 0cc3de5, 2026, which then queues
#: 10 calls behind a busy-wait to hide it; the revision of 744d01e times one call per trial from
#: an idle device, ``--with-host-overhead`` in the later one); the range's middle. Not fitted:
#: the corpus's only PyTorch-timed curves are that source's (docs' accuracy page).
TORCH_CALL_OVERHEAD = 25e-6


def host_floor(gpus_per_thread: int) -> float:
    """Seconds a collective cannot beat when one host thread issues it for
    ``gpus_per_thread`` GPUs (nccl-tests ``-g``): ``gpus_per_thread x`` :data:`HOST_CALL`, or
    0 for one GPU per thread (MPI, torchrun), whose host call NCCL's latencies hold.

    >>> round(host_floor(8) * 1e6, 1), host_floor(1)
    (33.6, 0.0)
    """
    return 0.0 if gpus_per_thread <= 1 else gpus_per_thread * HOST_CALL


def log_gpus_per_thread(attrs) -> int | None:
    """The ``gpus_per_thread`` that times an nccl-tests log's rows, from the ``df.attrs`` of
    :func:`flowsolver.nccl_tests.read`: its header's ``nGpus`` (``-g``), or 1 where its
    iterations were CUDA graph launches (``graph`` >= 1, ``-G``: the host's calls were captured
    before the timer started, no floor); None where the header does not say.

    >>> log_gpus_per_thread(dict(gpus_per_thread=8, graph=0)), log_gpus_per_thread(dict(gpus_per_thread=8, graph=1))
    (8, 1)
    """
    per_thread = attrs.get("gpus_per_thread") or None
    return 1 if per_thread is not None and (attrs.get("graph") or 0) >= 1 else per_thread


def with_host(seconds, gpus_per_thread: int = 1, overhead: float = 0.0, greater=max):
    """A collective of ``seconds`` on the GPUs as the host issues it: no less than
    :func:`host_floor` of ``gpus_per_thread`` (the host's calls overlap the GPUs' previous
    collective: the greater of the two), plus ``overhead`` seconds issued before it from an idle
    device. ``greater``: the maximum to take (a :class:`~._dual.Dual`-aware one for derivatives).

    >>> round(with_host(16e-6, 8) * 1e6, 1), round(with_host(16e-6, 2, 25e-6) * 1e6, 1)
    (33.6, 41.0)
    """
    if gpus_per_thread > 1:
        seconds = greater(seconds, host_floor(gpus_per_thread))
    return seconds + overhead
