"""topologies.from_astra_network: ASTRA-sim analytical network files written here."""

import networkx as nx
import pytest

import flowsolver as fs
import topologies as tp

GIB = 2**30          # astra-network-analytical: "1 GB = 2^30 B"


def _net(tmp_path, topology, npus, bandwidth, latency, extra=""):
    text = (f"# written by the test\ntopology: [ {', '.join(topology)} ]  # per dim\n"
            f"npus_count: [ {', '.join(map(str, npus))} ]\n"
            f"bandwidth: [ {', '.join(map(str, bandwidth))} ]  # GB/s\n"
            f"latency: [ {', '.join(map(str, latency))} ]  # ns\n{extra}")
    path = tmp_path / "network.yml"
    path.write_text(text)
    return path


def _fabric_cables(g, tier):
    return sum(1 for u, v, d in g.edges(data=True) if d["tier"] == tier) // 2


def test_the_three_dimensional_example(tmp_path):
    """ASTRA-sim's own example (2 x 8 x 4: Ring, FullyConnected, Switch)."""
    g = tp.from_astra_network(_net(tmp_path, ["Ring", "FullyConnected", "Switch"], [2, 8, 4],
                                   [200.0, 100.0, 50.0], [50.0, 500.0, 2000.0]))
    tp.validate(g)
    assert len(tp.gpus(g)) == 64
    # MultiDimTopology's own worked example: NPU 47 of [2, 8, 4] has address [1, 7, 2]
    assert g.nodes["npu47"]["coords"] == [1, 7, 2]
    # cables: 32 rings of 2 (one link each way), 8 complete graphs of 8, 16 switches of 4
    assert _fabric_cables(g, "dim1") == 32
    assert _fabric_cables(g, "dim2") == 64 // 8 * (8 * 7 // 2)
    assert _fabric_cables(g, "dim3") == 16 * 4
    assert sum(d["kind"] == "switch" and d["role"] == "switch" for _, d in g.nodes(data=True)) == 16
    r0, r1 = "npu0/router", "npu1/router"
    assert g[r0][r1]["capacity"] == 200 * GIB and g[r0][r1]["latency"] == pytest.approx(50e-9)
    assert g[r0]["npu2/router"]["capacity"] == 100 * GIB
    assert g[r0]["dim3/sw0"]["capacity"] == 50 * GIB
    assert g.has_edge("dim3/sw0", "npu16/router") and not g.has_edge("dim3/sw0", "npu1/router")
    # the NPU's own port carries all its links: 200 + 7 x 100 + 50 GB/s
    assert g["npu0"]["npu0/nic"]["capacity"] == pytest.approx((200 + 700 + 50) * GIB)
    assert tp.describe(g)["gpus"] == 64


@pytest.mark.parametrize("topology", ["Ring", "FullyConnected", "Switch"])
def test_ring_all_reduce_runs_at_the_link_rate(tmp_path, topology):
    """One dimension of 8 NPUs: a ring all-reduce in rank order uses one link (Switch: one
    port) per NPU and direction, so it takes 2 (p-1)/p S / B plus its latencies."""
    bw, size, p = 100.0, 2**32, 8
    g = tp.from_astra_network(_net(tmp_path, [topology], [p], [bw], [500.0]))
    r = fs.collective(g, "all_reduce", size, algorithm="ring")
    wire = 2 * (p - 1) / p * size / (bw * GIB)
    assert wire <= r.time <= wire * 1.01


def test_ring_of_npus_forwards_through_the_npus(tmp_path):
    g = tp.from_astra_network(_net(tmp_path, ["Ring"], [6], [10], [0]))
    routers = g.subgraph(n for n in g if n.endswith("/router"))
    assert nx.diameter(routers) == 3 and all(routers.out_degree(n) == 2 for n in routers)
    r = fs.collective(g, "all_to_all", 6 * 2**24)
    assert r.time > 0


def test_gigabyte_and_gpu_options_and_unknown_keys(tmp_path):
    path = _net(tmp_path, ["Switch"], [4], [25], [100], extra="links_count: [ 2 ]\n")
    g = tp.from_astra_network(path, gigabyte=1e9, gpu="b200")
    assert g["npu0/router"]["dim1/sw0"]["capacity"] == 25e9
    assert g.nodes["npu3"]["gpu_type"] == "b200"
    assert g.graph["notes"] == ["ignored key 'links_count'"]


def test_block_lists_parse_like_flow_lists(tmp_path):
    path = tmp_path / "block.yml"
    path.write_text("topology:\n  - Ring\n  - Switch\nnpus_count:\n  - 4\n  - 2\n"
                    "bandwidth: [ 50, 25 ]\nlatency:\n  - 10.5\n  - 20\n")
    g = tp.from_astra_network(path)
    assert len(tp.gpus(g)) == 8 and g.graph["params"]["latency_ns"] == [10.5, 20]


@pytest.mark.parametrize("args,match", [
    ((["Torus"], [4], [10], [1]), "must be one of Ring, FullyConnected, Switch"),
    ((["Ring", "Ring"], [4], [10, 10], [1, 1]), "one entry per dimension"),
    ((["Ring"], [0], [10], [1]), "npus_count of dimension 1"),
    ((["Ring"], [4], [-1], [1]), "bandwidth of dimension 1"),
    ((["Ring"], [4], [10], [-5]), "latency of dimension 1"),
    ((["Ring", "Switch"], [1, 1], [10, 10], [1, 1]), "gives 1 NPU"),
])
def test_bad_files(tmp_path, args, match):
    with pytest.raises(ValueError, match=match):
        tp.from_astra_network(_net(tmp_path, *args))


def test_missing_keys_and_bad_lines(tmp_path):
    path = tmp_path / "n.yml"
    path.write_text("topology: [ Ring ]\nnpus_count: [ 4 ]\n")
    with pytest.raises(ValueError, match="missing key"):
        tp.from_astra_network(path)
    path.write_text("topology: [ Ring\n")
    with pytest.raises(ValueError, match="line 1: unclosed list"):
        tp.from_astra_network(path)
    path.write_text("just words\n")
    with pytest.raises(ValueError, match="line 1: expected 'key: value'"):
        tp.from_astra_network(path)
    with pytest.raises(FileNotFoundError, match="absent.yml: no such file"):
        tp.from_astra_network(tmp_path / "absent.yml")


# -- bounds, overflow, bytes: one clear error naming the file (issue 27) ---------------------
from ..reader_checks import raises_clearly  # noqa: E402


@pytest.mark.parametrize("args,words", [
    ((["Ring", "Ring"], [1_000_000_000, 2], [1, 1], [1, 1]), ["npus_count", "max_npus=1000000"]),
    ((["Ring", "Switch", "Ring"], [1000, 1000, 1000], [1, 1, 1], [1, 1, 1]), ["npus_count", "max_npus"]),
    ((["FullyConnected"], [100_000], [1], [1]), ["FullyConnected", "max_links"]),
])
def test_sizes_are_bounded_before_building(tmp_path, args, words):
    """The NPU count (product of npus_count) and the cable count are checked against
    max_npus / max_links before a node is added."""
    import tracemalloc

    path = _net(tmp_path, *args)
    tracemalloc.start()
    try:
        raises_clearly(tp.from_astra_network, path, *words)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


def test_limits_are_keyword_arguments(tmp_path):
    path = _net(tmp_path, ["Ring", "FullyConnected"], [4, 4], [1, 1], [1, 1])
    # 16 NPUs; 16 ring cables (4 rings of 4) + 4 complete graphs of 4 (6 cables each) = 40
    assert len(tp.gpus(tp.from_astra_network(path, max_npus=16, max_links=40))) == 16
    raises_clearly(lambda p: tp.from_astra_network(p, max_npus=15), path, "16", "max_npus=15")
    raises_clearly(lambda p: tp.from_astra_network(p, max_links=39), path, "40", "max_links=39")
    with pytest.raises(ValueError, match="max_npus"):
        tp.from_astra_network(path, max_npus=0)


@pytest.mark.parametrize("bandwidth,latency,word", [
    ("1e300", "1", "bandwidth"),              # 1e300 GB/s x 2**30 B/GB overflows to inf bytes/s
    ("1e400", "1", "bandwidth"),
    ("9" * 4000, "1", "bandwidth"),           # an integer too large for a float
    ("10", "9" * 4000, "latency"),
    ("10", "nan", "latency"),
    ("10", "-1", "latency"),
    ("nan", "1", "bandwidth"),
])
def test_overflowing_and_invalid_numbers(tmp_path, bandwidth, latency, word):
    path = _net(tmp_path, ["Ring"], [4], [bandwidth], [latency])
    raises_clearly(tp.from_astra_network, path, word, "dimension 1")


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "net.yml"
    path.write_bytes(b"topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1\xff0 ]\nlatency: [ 1 ]\n")
    raises_clearly(tp.from_astra_network, path, "line 3", "UTF-8")
    raises_clearly(tp.from_astra_network, tmp_path / "absent.yml", "no such file")


def test_latency_is_stored_in_seconds_on_every_file_link(tmp_path):
    """ns in the file, s on the edge: 2000 ns = 2e-6 s on every dim-2 link; the NPU's own port
    (GPU -> NIC -> router, not in the file) has none."""
    g = tp.from_astra_network(_net(tmp_path, ["Ring", "Switch"], [4, 2], [100, 25], [500, 2000]))
    dims = {}
    for u, v, d in g.edges(data=True):
        dims.setdefault(d["tier"], set()).add(d["latency"])
    assert dims == {"dim1": {500e-9}, "dim2": {2000e-9}, "npu": {0.0}}


def test_the_number_of_dimensions_is_bounded(tmp_path):
    """Every NPU keeps one coordinate per dimension: 40,000 dimensions of 1 NPU and ten of 2
    would be 1024 NPUs x 40,010 coordinates; refused before building (max_dims, default 16)."""
    dims = 40_000 * [1] + 10 * [2]
    path = _net(tmp_path, len(dims) * ["Ring"], dims, len(dims) * [1], len(dims) * [1])
    raises_clearly(tp.from_astra_network, path, "40010 dimensions", "max_dims=16")
    small = _net(tmp_path, 17 * ["Ring"], 16 * [1] + [2], 17 * [1], 17 * [1])
    raises_clearly(tp.from_astra_network, small, "max_dims=16")
    assert len(tp.gpus(tp.from_astra_network(small, max_dims=17))) == 2


def test_a_key_given_twice_or_a_number_in_other_digits_is_refused(tmp_path):
    # YAML keeps a repeated key's last value silently; int() takes '1_6' and Arabic-Indic digits
    from topologies.formats.astra import parse_simple_yaml
    with pytest.raises(ValueError, match=r"line 3: 'npus_count' is given twice"):
        parse_simple_yaml("topology: [ Ring ]\nnpus_count: [ 4 ]\nnpus_count: [ 8 ]\n")
    assert parse_simple_yaml("n: [ 1_6, \u0668, 16 ]") == {"n": ["1_6", "\u0668", 16]}     # words, not numbers


def test_a_few_lines_cannot_ask_for_millions_of_cables(tmp_path):
    # FullyConnected over 4,472 NPUs: n (n - 1) / 2 = 9,997,156 cables from an 83-byte file (it
    # built for minutes under the old 10 M default); refused before anything is built
    path = tmp_path / "fc.yml"
    path.write_text("topology: [ FullyConnected ]\nnpus_count: [ 4472 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n")
    with pytest.raises(ValueError, match=r"fc\.yml: .* 9997156 cables, more than max_links=1000000"):
        tp.read(path)


def test_docstring_defaults_are_the_signatures():
    # the docstring said max_links defaults to 10,000,000; the signature's default is 1,000,000
    import inspect
    import re

    from topologies.formats import astra

    sig = inspect.signature(astra.from_astra_network).parameters
    doc = astra.from_astra_network.__doc__
    for name in ("max_npus", "max_links", "max_dims"):
        said = re.search(rf"{name} : int\n.*?\(default ([\d,]+)", doc, re.S).group(1)
        assert int(said.replace(",", "")) == sig[name].default, name
    assert sig["max_links"].default == astra.MAX_LINKS == 1_000_000


def test_cost_of_a_ring_is_near_the_stated_figure(tmp_path):
    # the comment at MAX_LINKS: a Ring is ~4.6 kB an NPU as a graph (3 nodes and 6 edges an NPU)
    p = tmp_path / "ring.yml"
    p.write_text("topology: [ Ring ]\nnpus_count: [ 1000 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    g = tp.from_astra_network(p)
    assert g.number_of_nodes() == 3 * 1000 and g.number_of_edges() == 6 * 1000
