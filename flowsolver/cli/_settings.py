"""What the commands that time collectives take beside the cluster: ``--algorithm`` and
``--protocol`` as ``NCCL_ALGO`` / ``NCCL_PROTO`` take them, checked when the command line is
parsed (:mod:`flowsolver._nccl_env`, NCCL's parser) and resolved for the op when it is known
(:func:`flowsolver.collectives.setting_choices`); ``--calibration FILE.json``, a saved
:class:`~flowsolver.Calibration` (``calibrate --save``)."""

from __future__ import annotations

import argparse
import sys

from .._nccl_env import ALGO_NAMES, PROTO_NAMES, parse
from ..collectives import PROTOCOLS, own_algorithms
from ._words import CliError

__all__ = ["algorithm_setting", "protocol_setting", "ALGORITHM_HELP", "PROTOCOL_HELP", "add_calibration",
           "calibration_of"]

#: each variable's example of ``function:list`` entries
_EXAMPLE = {"NCCL_ALGO": "allreduce:tree;allgather:ring", "NCCL_PROTO": "allreduce:ll128,simple;allgather:ll"}


def _syntax(variable: str) -> str:
    return ("names separated by ',' (NCCL's choice among them), a leading '^' to exclude, 'function:list' "
            f"entries separated by ';' ({_EXAMPLE[variable]}), in any case")


ALGORITHM_HELP = (f"auto (NCCL's choice, the default) or what NCCL_ALGO takes: {_syntax('NCCL_ALGO')}; NCCL's "
                  "names (ring, tree, nvls, nvlstree, pat) or flowsolver's (halving_doubling, hierarchical, pairwise, "
                  "direct, binomial, nvls_tree)")
PROTOCOL_HELP = (f"auto (NCCL's choice by size, the default) or what NCCL_PROTO takes: {_syntax('NCCL_PROTO')}; "
                 f"{', '.join(PROTOCOLS)}")


def _setting(text: str, option: str, variable: str, names: dict, also=None) -> str:
    """``text`` as given where NCCL's parser takes it (``auto`` included), else argparse's error
    naming the reason and what the option takes."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        if not text.strip():
            raise ValueError("an empty value names nothing")
        parse(text, names, option, also=also)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err}; it takes auto or what {variable} takes: {_syntax(variable)}") from None
    return text


def algorithm_setting(text: str) -> str:
    """``--algorithm``: ``auto``, NCCL's names as ``NCCL_ALGO`` takes them, or flowsolver's own.

    >>> algorithm_setting("Ring,Tree"), algorithm_setting("halving_doubling")
    ('Ring,Tree', 'halving_doubling')
    """
    return _setting(text, "--algorithm", "NCCL_ALGO", ALGO_NAMES, own_algorithms())


def protocol_setting(text: str) -> str:
    """``--protocol``: ``auto`` or names as ``NCCL_PROTO`` takes them.

    >>> protocol_setting("^ll128")
    '^ll128'
    """
    return _setting(text, "--protocol", "NCCL_PROTO", PROTO_NAMES)


def add_calibration(parser) -> None:
    """``--calibration FILE.json``: a calibration ``calibrate --save`` wrote, applied to every
    collective (``collective(..., model=)``; a training step's ``collective_options``)."""
    parser.add_argument("--calibration", metavar="FILE.json", default=None,
                        help="a calibration that calibrate LOG... --save FILE.json wrote: its fitted efficiencies, "
                             "latencies and pipeline applied to every collective (default: the library's)")


def calibration_of(args, graph=None):
    """The :class:`~flowsolver.Calibration` ``--calibration`` names, or None; an error naming
    the option and the file where it cannot be read as one. With ``graph``: an error where it
    does not fit it (more ranks than GPUs, an efficiency of a technology neither on its links
    nor in the catalogue, :meth:`Calibration.check`), and a warning on stderr
    where none of its fitted efficiencies names a technology of the cluster's links (a fit of
    another fabric: they change nothing here, its latencies and pipeline still apply)."""
    if args.calibration is None:
        return None
    from ..collectives import Calibration

    try:
        cal = Calibration.load(args.calibration)
    except (FileNotFoundError, IsADirectoryError) as err:
        raise CliError(f"--calibration: cannot read {args.calibration!r}: {err.strerror or 'no such file'}") from None
    except ValueError as err:
        raise CliError(f"--calibration: {err}") from None
    if graph is not None:
        try:
            cal.check(graph)                # a technology of no link nor catalogue entry: a typo
        except ValueError as err:
            raise CliError(f"--calibration {args.calibration}: {err}") from None
    absent, kept, techs = ([], [], set()) if graph is None else cal.technologies_absent(graph)
    if absent:                      # (also where others of its technologies are here: review25 F8)
        print(f"flowsolver: warning: --calibration {args.calibration}: its efficiencies ({', '.join(absent)}) "
              f"name no link of this cluster ({', '.join(sorted(techs))}): they change nothing here; its "
              + (f"{', '.join(kept)}, " if kept else "") + "latencies and pipeline apply", file=sys.stderr)
    return cal
