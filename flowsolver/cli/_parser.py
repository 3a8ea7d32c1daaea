"""The ``flowsolver`` argument parser: the sub-commands of :mod:`._arguments` and the
fleet-level ones of :mod:`._fleet`."""

from __future__ import annotations

import argparse

from .._version import __version__
from ._arguments import (_EXAMPLES, _accepted, _add_calibrate, _add_collective, _add_replay, _add_study,
                         _add_sweep, _add_topology_command, _add_train, _add_upgrade)
from ._fleet import add_design, add_goodput
from ._plan import add_plan
from ._serving import add_serve

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``flowsolver`` argument parser with its sub-commands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="flowsolver", description="What your GPU cluster's network costs you.",
                                     epilog=_EXAMPLES + "\n" + _accepted(), formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"flowsolver {__version__}")
    sub = parser.add_subparsers(dest="command")
    for add in (_add_topology_command, _add_collective, _add_calibrate, _add_train, _add_study, _add_sweep,
                _add_replay, _add_upgrade, add_design, add_goodput, add_serve, add_plan):
        add(sub, fmt)
    return parser
