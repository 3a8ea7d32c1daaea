"""The command line's words: an error already in them (:class:`CliError`) and the library's
messages rewritten into them (:func:`in_cli_words`: ``gpu=`` becomes ``--gpu``)."""

from __future__ import annotations

import argparse
import re


class CliError(ValueError):
    """A bad argument, in the command line's own words already (:func:`in_cli_words` leaves
    its message as it is)."""


#: the command line's options that it hands the library as ``policy_options`` keys
_POLICY_OPTIONS = ("subflows",)

#: per command, the library's names for what an option of another name gives (the option's
#: ``dest``): goodput's --interval is JobResponse's ``checkpoint_interval``, and so on
#: (``repair_time`` is not one: it is in seconds, --repair in hours; the command checks --repair itself)
_ALIASES = {"goodput": {"checkpoint_interval": "interval", "restart_time": "restart"}}
#: per command, the library object whose name prefixes its messages and that the command
#: line builds from its options (no option of that name): the prefix is dropped
_BUILT_FROM_OPTIONS = {"goodput": "response"}


def in_cli_words(message: str, parser: argparse.ArgumentParser, command: str | None) -> str:
    """An API error message with the Python argument names it uses (``gpu=``, ``ranks must``)
    written as the ``command``'s own options (``--gpu``, ``--ranks must``); names the command
    has no option for stay as they are.

    >>> from flowsolver.cli._parser import build_parser
    >>> p = build_parser()
    >>> in_cli_words("the graph's GPUs have types ['a', 'b']: pass gpu= (one type)", p, "train")
    "the graph's GPUs have types ['a', 'b']: pass --gpu (one type)"
    >>> in_cli_words("global_batch must be a multiple of 8, got 12", p, "train")
    '--global-batch must be a multiple of 8, got 12'
    >>> in_cli_words("ranks must be distinct GPU ranks, got [0, 0]", p, "collective")
    '--ranks must be distinct GPU ranks, got [0, 0]'
    >>> in_cli_words("tp * cp * pp must divide 8, got tp=3, cp=1, pp=1; dp x micro_batch = 2", p, "train")
    '--tp * --cp * --pp must divide 8, got --tp 3, --cp 1, --pp 1; --dp x --micro-batch = 2'
    >>> in_cli_words("unknown gpu 'x'; known: b200 (or pass a GpuSpec)", p, "train")
    "unknown gpu 'x'; known: b200"
    >>> in_cli_words("the graph (ranks=) has 16: pass ranks= the 8 GPU ranks it ran on (e.g. ranks=range(8); "
    ...              "--ranks on the command line) or a graph of 8 GPUs", p, "calibrate")
    'the graph (--ranks) has 16: pass --ranks the 8 GPU ranks it ran on or a graph of 8 GPUs'
    >>> in_cli_words("policy_options['subflows'] must be an integer >= 1, got -1", p, "collective")
    '--subflows must be an integer >= 1, got -1'
    >>> in_cli_words("g.log: the file is 9 bytes, more than max_bytes=8; pass max_bytes= to read it", p, "collective")
    'g.log: the file is 9 bytes, more than --log-max-bytes 8; pass --log-max-bytes to read it'
    >>> in_cli_words("the trace has 16 ranks but the graph 8 GPUs: pass a bigger cluster (or ranks=)", p, "replay")
    'the trace has 16 ranks but the graph 8 GPUs: pass a bigger cluster'
    >>> in_cli_words("response: with checkpoint_cost=0 there is no optimal interval: give checkpoint_interval", p,
    ...              "goodput")
    'with --checkpoint-cost 0 there is no optimal interval: give --interval'
    """
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None or command not in sub.choices:
        return message
    actions = sub.choices[command]._actions
    if (built := _BUILT_FROM_OPTIONS.get(command)) and not any(a.dest == built for a in actions):
        message = re.sub(rf"^{built}(?:: |\.)", "", message)
    options = {a.dest: next((o for o in a.option_strings if o.startswith("--")), None) for a in actions}
    for name, dest in _ALIASES.get(command, {}).items():
        if options.get(dest):               # a name with "_" in it: a Python name wherever it stands
            message = re.sub(rf"(?<![\w.-]){name}=(?=[^\s,;)])", options[dest] + " ", message)
            message = re.sub(rf"(?<![\w.-]){name}=?(?![\w-])", options[dest], message)
    # a keyword offered as another way ("a bigger cluster (or ranks=)") that the command has no option for
    message = re.sub(r" \(or (\w+)=\)", lambda m: m[0] if options.get(m[1]) else "", message)
    if any(a.dest == "log_max_bytes" for a in actions):   # the log reader's max_bytes=
        message = re.sub(r" \((?:or |e\.g\. )?--log-max-bytes (?:on|from) the command line\)", "", message)
        message = re.sub(r"\bmax_bytes=(?=\d)", "--log-max-bytes ", message)
        message = re.sub(r"\bmax_bytes\b=?", "--log-max-bytes", message)
    for action in actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest in ("help", "json", "csv"):
            continue
        name, option = re.escape(action.dest), longs[0]
        if action.dest in _POLICY_OPTIONS:      # the policy_options= the command line passes
            message = message.replace(f"policy_options[{action.dest!r}]", option)
        message = re.sub(rf"\b{name}=(?![\w\"'(\[])", option, message)     # "pass gpu=" (no value given)
        message = re.sub(rf"\b{name}=", option + " ", message)                # "got ranks=[0, 0]"
        message = re.sub(rf"(?<![\w.-]){name} (must|is|has)\b", rf"{option} \1", message)
        if len(action.dest) == 1:   # a, g, h, k, p: words and file names too ("a leaf needs", "g.log")
            continue
        message = re.sub(rf"^{name}\b(?!-)", option, message)                  # a message that starts with it
        message = re.sub(rf"(?<![\w.-]){name}(?= [*x] )|(?<= [*x] ){name}(?![\w=-])", option, message)  # tp * pp
        if "_" in action.dest:      # micro_batch: a Python name in any position
            message = re.sub(rf"(?<![\w.-]){name}(?![\w-])", option, message)
    message = re.sub(r" \(or pass an? \w+(?:Spec|Tech|Model)\b[^)]*\)", "", message)   # Python objects
    # the API's own hint for command-line users ("e.g. ranks=range(8); --ranks on the command line")
    message = re.sub(r" \(e\.g\. [^;]*; --[\w-]+ on the command line\)", "", message)
    return re.sub(r"; --[\w-]+ on the command line\)", ")", message)


#: what a run on InfiniBand leaves out (newuser27 #5): the switches' in-network reduction
SHARP_NOTE = ("# note: InfiniBand's in-network reduction (SHARP: NCCL's CollNet and NVLS with SHARP, on "
              "Quantum-2 / Quantum-X800 switches with NCCL's SHARP plugin) is not modelled: the switches reduce "
              "the nodes' data, so each node sends and receives an all-reduce's bytes once whatever the node "
              "count (a ring across N nodes moves 2(N-1)/N of them through each node)")


def sharp_note(techs, op) -> list:
    """``[SHARP_NOTE]`` where one of the link technologies ``techs`` is InfiniBand and ``op`` (a
    collective, or None for a training step) has an all-reduce; else ``[]``.

    >>> sharp_note(["ib_ndr"], "all_reduce") == [SHARP_NOTE], sharp_note(["roce_400g"], "all_reduce")
    (True, [])
    """
    import topologies as tp

    if op not in (None, "all_reduce"):
        return []
    ib = any(t in tp.link_names() and tp.get_link(t).family == "infiniband" for t in techs)
    return [SHARP_NOTE] if ib else []
