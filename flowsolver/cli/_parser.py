"""The ``flowsolver`` argument parser: the sub-commands of :mod:`._arguments` and the
fleet-level ones of :mod:`._fleet`."""

from __future__ import annotations

import argparse

from .._version import __version__
from ..nccl_tests import MAX_BYTES as LOG_MAX_BYTES
from ._arguments import (_EXAMPLES, _accepted, _add_calibrate, _add_collective, _add_replay, _add_study,
                         _add_sweep, _add_topology_command, _add_upgrade)
from ._fleet import add_design, add_goodput
from ._plan import add_plan
from ._serving import add_serve
from ._settings import add_calibration
from ._train_arguments import add_train

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``flowsolver`` argument parser with its sub-commands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="flowsolver", description="What your GPU cluster's network costs you.",
                                     epilog=_EXAMPLES + "\n" + _accepted(), formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"flowsolver {__version__}")
    sub = parser.add_subparsers(dest="command")
    for add in (_add_topology_command, _add_collective, _add_calibrate, add_train, _add_study, _add_sweep,
                _add_replay, _add_upgrade, add_design, add_goodput, add_serve, add_plan):
        add(sub, fmt)
    for command in ("collective", "calibrate"):          # the commands that read nccl-tests logs
        _add_log_limit(sub.choices[command])
    for command in ("collective", "train"):              # the commands that apply a saved calibration
        add_calibration(sub.choices[command])
    return parser


def _add_log_limit(parser) -> None:
    """``--log-max-bytes``: the largest nccl-tests log read (:func:`flowsolver.nccl_tests.read`'s
    ``max_bytes``; the collective command's ``-e/--max-bytes`` is its largest message size)."""
    parser.add_argument("--log-max-bytes", metavar="SIZE", default=None,
                        help=f"largest nccl-tests log to read, in bytes (default: the environment's "
                             f"FLOWSOLVER_LOG_MAX_BYTES, else {LOG_MAX_BYTES // 2**20}M)")
