"""Pipeline programs for the trace writer: which forward and backward passes one pipeline
rank runs, in which order (:func:`flowsolver.training._pipeline.pass_order`, the one walk
of Megatron's schedule the step's memory model uses too), and where their inputs come from
and their outputs go.

* ``vp = 1``: Megatron-Core's 1F1B (``forward_backward_pipelining_without_interleaving``):
  ``pp - 1 - stage`` warm-up forwards, then a forward and a backward in turn, then the
  cool-down backwards; its point-to-point transfers are blocking and batched
  (``send_forward_recv_backward`` and ``send_backward_recv_forward`` after each pass of the
  steady state; Megatron-Bridge's default without interleaving), so each is a step of the
  program the next pass waits for.
* ``vp > 1``: Megatron-Core's interleaved 1F1B
  (``forward_backward_pipelining_with_interleaving``): ``m vp`` virtual microbatches,
  ``2 (pp - 1 - stage) + (vp - 1) pp`` warm-up forwards, the model chunk of virtual
  microbatch ``k`` is ``(k // pp) mod vp`` (backward: counted from the last chunk), its
  microbatch ``(k // (pp vp)) pp + k mod pp``. Transfers overlap compute
  (``overlap_p2p_comm``, Megatron-Bridge's default with interleaving): receives are posted
  up front, sends leave as soon as their pass is done. A forward of chunk ``c`` on stage 0
  takes its input from chunk ``c - 1`` of the last stage (the wrap), a backward of chunk
  ``c`` on the last stage from chunk ``c + 1`` of stage 0.
"""

from __future__ import annotations

from ..training import pass_order, warmup_passes

__all__ = ["pass_order", "source", "target", "blocking_program", "p2p_tag"]


def source(direction: str, stage: int, chunk: int, pp: int, vp: int):
    """``(stage, chunk)`` whose output this pass takes (None: the first forward, the last
    backward's loss)."""
    if direction == "F":
        return (stage - 1, chunk) if stage else ((pp - 1, chunk - 1) if chunk else None)
    return (stage + 1, chunk) if stage < pp - 1 else ((0, chunk + 1) if chunk < vp - 1 else None)


def target(direction: str, stage: int, chunk: int, pp: int, vp: int):
    """``(stage, chunk)`` this pass's output goes to (None at the ends of the model)."""
    if direction == "F":
        return (stage + 1, chunk) if stage < pp - 1 else ((0, chunk + 1) if chunk < vp - 1 else None)
    return (stage - 1, chunk) if stage else ((pp - 1, chunk - 1) if chunk else None)


def p2p_tag(direction: str, microbatch: int, receiver_chunk: int, vp: int) -> int:
    """The tag of one transfer, the same on both sides: microbatch, the receiving chunk and
    the direction."""
    return 2 * (microbatch * vp + receiver_chunk) + (direction == "B")


def blocking_program(stage: int, pp: int, m: int) -> list:
    """Megatron's 1F1B (``vp = 1``) as steps: ``("pass", d, i)`` or ``("p2p", items)``,
    items ``(kind, d, i)`` (``kind`` ``send`` / ``recv`` of direction ``d``'s tensor of
    microbatch ``i``) batched and waited for together. Empty batches (the end stages'
    missing neighbours) are dropped.

    >>> [s if s[0] == "pass" else ("p2p", len(s[1])) for s in blocking_program(0, 2, 2)]
    [('pass', 'F', 0), ('p2p', 1), ('pass', 'F', 1), ('p2p', 2), ('pass', 'B', 0), ('p2p', 1), ('pass', 'B', 1)]
    """
    first, last = stage == 0, stage == pp - 1
    steps = []

    def p2p(*items):
        kept = [(k, d, i) for k, d, i in items if not ((k, d) in (("recv", "F"), ("send", "B")) and first)
                and not ((k, d) in (("send", "F"), ("recv", "B")) and last)]
        if kept:
            steps.append(("p2p", kept))

    warm = warmup_passes(stage, pp, 1, m)
    for i in range(warm):
        p2p(("recv", "F", i))
        steps.append(("pass", "F", i))
        p2p(("send", "F", i))
    steady = m - warm
    if steady:
        p2p(("recv", "F", warm))
    for k in range(steady):
        steps.append(("pass", "F", warm + k))
        p2p(("send", "F", warm + k), ("recv", "B", k))
        steps.append(("pass", "B", k))
        p2p(("send", "B", k), *((("recv", "F", warm + k + 1),) if k < steady - 1 else ()))
    for i in range(steady, m):
        p2p(("recv", "B", i))
        steps.append(("pass", "B", i))
        p2p(("send", "B", i))
    return steps
