"""Independent graph measurements for the tests (plain networkx, no library helpers), and
the validation corpus's measured curves with the model's and NCCL's estimate's errors on them."""

import contextlib
import csv
import io
import os
import re
import threading
from pathlib import Path

import networkx as nx

CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "validation" / "collectives.csv"


def corpus_curve(name):
    """``{size bytes: out-of-place time us}`` of the corpus curve ``name`` (collectives.csv)."""
    with CORPUS.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["curve"] == name and r["in_place"] in ("0", "")]
    return {int(r["size_bytes"]): float(r["time_us"]) for r in rows}


def corpus_case(name, nodes, per_node):
    """``(graph, ranks, {size bytes: time us})`` of the corpus curve ``name`` on ``nodes`` x
    ``per_node`` GPUs, on the cluster benchmarks/validation/setups.py builds for it."""
    import sys
    sys.path.insert(0, str(CORPUS.parent))
    import setups

    graph, ranks = setups.curve_placement(setups.CURVES[name], nodes, per_node)
    return graph, ranks, corpus_curve(name)


def release_points(name, nodes, per_node, sizes, release, op="all_reduce"):
    """``[(size, measured s, result under NCCL release, result under the model's)]`` of ``op``
    on the corpus curve ``name``'s cluster (:func:`corpus_case`) at ``sizes``."""
    from flowsolver import collective

    graph, ranks, measured = corpus_case(name, nodes, per_node)
    return [(size, measured[size] * 1e-6, collective(graph, op, size, ranks=ranks, nccl_version=release),
             collective(graph, op, size, ranks=ranks)) for size in sizes]


def kind_count(g, kind, role=None):
    return sum(1 for _, d in g.nodes(data=True)
               if d.get("kind") == kind and (role is None or d.get("role") == role))


def errors_against_curve(curve, graph, op, sizes, pick):
    """``{size: (model error, NCCL estimate's error)}`` of ``op`` at ``sizes`` on ``graph``
    against the corpus curve ``curve``, each size checked to be timed as ``pick``
    (``(algorithm, protocol)``, NCCL's choice there)."""
    from flowsolver import collective

    measured = corpus_curve(curve)
    out = {}
    for size in sizes:
        r = collective(graph, op, float(size))
        assert (r.algorithm, r.protocol) == pick, size
        estimate = r.estimates[f"{pick[0]}/{pick[1]}"]
        out[size] = (r.time * 1e6 / measured[size] - 1, estimate * 1e6 / measured[size] - 1)
    return out


def min_cut(g, first, second):
    """Minimum cut capacity (bytes/s) separating node set ``first`` from ``second``."""
    net = nx.DiGraph()
    for u, v, d in g.edges(data=True):
        if "network" in g.nodes[u] or "network" in g.nodes[v]:
            continue
        net.add_edge(u, v, capacity=d["capacity"])
    for n in first:
        net.add_edge("SRC", n)
    for n in second:
        net.add_edge(n, "SNK")
    return nx.minimum_cut_value(net, "SRC", "SNK")


def endpoint_diameter(g, endpoints, allowed_kinds):
    """Largest BFS hop count between two endpoints over nodes of the allowed kinds."""
    sub = g.subgraph([n for n, d in g.nodes(data=True) if d["kind"] in allowed_kinds])
    ends = set(endpoints)
    best = 0
    for src in endpoints:
        lengths = nx.single_source_shortest_path_length(sub, src)
        assert ends <= set(lengths), "network not connected"
        best = max(best, max(lengths[e] for e in ends))
    return best


def ranked_gpus(g):
    gpus = [(d["rank"], n) for n, d in g.nodes(data=True) if d["kind"] == "gpu"]
    return [n for _, n in sorted(gpus)]


@contextlib.contextmanager
def fed_fifo(path, data: bytes, times: int):
    """A FIFO at ``path`` that a thread writes ``data`` into ``times`` times (a pipe, as
    ``/dev/stdin`` or a shell's ``<(...)`` gives: its size says 0, whatever it streams); the
    writer stops when the reader closes. Yields the path."""
    os.mkfifo(path)

    def feed():
        try:
            with open(path, "wb") as w:
                for _ in range(times):
                    w.write(data)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        # a reader that never opened the FIFO leaves the writer waiting in open(): open and close it
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(10)


def written_calibration(tmp_path, cal, change):
    """A calibration file of ``cal`` (flowsolver's JSON) edited by ``change(data)`` before it is
    written to ``tmp_path / "cal.json"``; its path."""
    import json
    from flowsolver.collectives._calibration_file import calibration_dict

    data = calibration_dict(cal)
    change(data)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return path


def cli_error(capsys, argv) -> str:
    """The one-line message ``flowsolver ARGV`` exits with (status 2), less its prefix."""
    from flowsolver.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("flowsolver: error: ") and "\n" not in err
    return err[len("flowsolver: error: "):]


#: a docs page's python blocks, each with the docs-test skip marker before it where there is one
GUIDE_BLOCK = re.compile(r"(<!-- docs-test: skip \([^)]*\) -->\s*)?```python\n(.*?)```", re.S)


def guide_blocks(path, expected) -> list:
    """The python blocks of the docs page ``path`` not marked skip whose ``expected(code)``
    (the printed lines the page gives for them) is not empty."""
    return [code for skip, code in GUIDE_BLOCK.findall(Path(path).read_text()) if not skip and expected(code)]


def printed_lines(code: str, name: str) -> list:
    """The lines a docs block prints when run as a script (``name`` for its tracebacks)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, name, "exec"), {"__name__": "__guide__"})
    return out.getvalue().splitlines()


def random_compact_graph(rng, most_nodes):
    """A random routing graph (:class:`flowsolver.routing._shortest_paths.CompactGraph`) of 6 to
    ``most_nodes`` nodes from ``rng``: parallel cables (weights 1-3), a fifth of the nodes endpoints
    only, link ids from 100."""
    import numpy as np

    from flowsolver.routing._shortest_paths import CompactGraph
    nv = int(rng.integers(6, most_nodes))
    m = int(rng.integers(nv, 5 * nv))
    tail, head = rng.integers(0, nv, m), rng.integers(0, nv, m)
    keep = tail != head
    tail, head = tail[keep], head[keep]
    weight = rng.integers(1, 4, len(tail)).astype(float)       # parallel cables
    transit = rng.random(nv) < 0.8                              # some nodes only endpoints
    return CompactGraph(nv, tail, head, weight, np.arange(len(tail)) + 100, transit)
