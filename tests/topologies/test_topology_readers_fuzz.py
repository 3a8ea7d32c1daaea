"""Every machine-description reader, fed damaged files (issue 27): starting from a valid file
written here (and, for NCCL, the shared real dumps when present), random truncation, byte flips
and numbers replaced by huge, negative, NaN, infinite, overflowing or non-numeric ones. Each
damaged file reads, or raises one clear error naming the file (a ValueError or OSError of one
line); nothing else escapes (no KeyError, IndexError, RecursionError, UnicodeDecodeError,
OverflowError, ...), and the reader's peak Python memory stays under 64 MiB."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies as tp

from ..reader_checks import mutate, read_or_refuse

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-topo"
fuzz = settings(max_examples=400, deadline=None, derandomize=True,     # reproducible CI runs
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _json_file():
    import json

    import networkx as nx
    return json.dumps(nx.node_link_data(tp.torus((2, 3)), edges="edges")).encode()


_ASTRA = (b"topology: [ Ring, FullyConnected, Switch ]  # per dimension\n"
          b"npus_count: [ 2, 4, 2 ]\nbandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s\n"
          b"latency:\n  - 50.0\n  - 500.0\n  - 2000.0\n")

# 4 GPUs, 2 per server (ids 0-3), an NVSwitch per server (4, 5), two leaves (6, 7), a spine (8)
_SIMAI = (b"9 2 2 3 12 H100\n4 5 6 7 8\n"
          b"0 4 2880Gbps 0.000025ms 0\n1 4 2880Gbps 0.000025ms 0\n2 5 2880Gbps 0.000025ms 0\n"
          b"3 5 2880Gbps 0.000025ms 0\n0 6 400Gbps 0.0005ms 0\n1 7 400Gbps 0.0005ms 0\n"
          b"2 6 400Gbps 0.0005ms 0\n3 7 400Gbps 0.0005ms 0\n6 8 400Gbps 500ns 0\n"
          b"6 8 400Gbps 500ns 0\n7 8 400Gbps 1us 0\n7 8 400Gbps 1us 0\n")


def _pci(busid, cls, inner, speed="32.0 GT/s PCIe", width="16"):
    return (f'<pci busid="{busid}" class="{cls}" link_speed="{speed}" link_width="{width}">'
            f"{inner}</pci>")


def _nccl_file():
    gpus = "".join(_pci(f"0000:1{i}:00.0", "0x030200",
                        f'<gpu dev="{i}" sm="90" rank="{i}" gdr="1">'
                        '<nvlink target="0000:a1:00.0" count="9" tclass="0x068000"/>'
                        '<nvlink target="0000:a2:00.0" count="9" tclass="0x068000"/></gpu>')
                   for i in range(2))
    nics = "".join(_pci(f"0000:2{i}:00.0", "0x020700",
                        f'<nic><net name="mlx5_{i}" dev="{i}" speed="400000" port="1" '
                        'latency="0.000000" maxconn="131072" gdr="1"/></nic>', width="8")
                   for i in range(2))
    body = (f'<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel">'
            f'{_pci("0000:01:00.0", "0x060400", gpus + nics, speed="16.0 GT/s PCIe")}</cpu></system>')
    return body.encode()


def _nccl_read(path):
    """The model, and the one-server cluster it builds (a model that cannot build is a bug)."""
    return tp.validate(tp.rail_optimized(1, server=tp.from_nccl_xml(path)))


READERS = {"json": (tp.load, _json_file, "g.json"), "astra": (tp.from_astra_network, lambda: _ASTRA, "n.yml"),
           "simai": (tp.from_simai, lambda: _SIMAI, "topo"), "nccl": (_nccl_read, _nccl_file, "t.xml")}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_the_valid_starting_files_read(folder, reader):
    read, make, name = READERS[reader]
    path = folder / f"valid-{name}"
    path.write_bytes(make())
    read(path)


@pytest.mark.parametrize("reader", sorted(READERS))
@fuzz
@given(data=st.data())
def test_damaged_files_read_or_fail_clearly(folder, reader, data):
    read, make, name = READERS[reader]
    path = folder / name
    path.write_bytes(mutate(make(), data.draw, st))
    read_or_refuse(read, path)


@pytest.mark.parametrize("dump", ["oci_BM.GPU.H100.8_topology.xml", "azure_ndv5-topo.xml"])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_real_nccl_dumps_read_or_fail_clearly(folder, dump, data):
    source = DATA / dump
    if not source.exists():
        pytest.skip(f"{source} is absent (../shared/data: optional data, not shipped; docs/guide/data.md)")
    path = folder / dump
    path.write_bytes(mutate(source.read_bytes(), data.draw, st))
    read_or_refuse(lambda p: tp.from_nccl_xml(p, gpu="h100_sxm"), path)


_ODD_VALUES = [None, [], {}, [[1]], {"a": 1}, "x", 1e308, -1, True, 10**400, [None], {"id": []}]


@fuzz
@given(data=st.data())
def test_node_link_json_with_odd_values_reads_or_fails_clearly(folder, data):
    """Structural damage the byte edits rarely make: any value of the node-link document (the
    top level, a list, an entry, an id, an attribute) replaced by an odd one."""
    import copy
    import json

    import networkx as nx
    doc = nx.node_link_data(tp.torus((2, 2)), edges="edges")
    for _ in range(data.draw(st.integers(1, 3))):
        parent, key = None, None
        node = doc
        for _ in range(data.draw(st.integers(0, 4))):
            keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
            if not keys:
                break
            parent, key = node, data.draw(st.sampled_from(keys))
            node = node[key]
        value = copy.deepcopy(data.draw(st.sampled_from(_ODD_VALUES)))
        if parent is None:
            doc = value
        else:
            parent[key] = value
    path = folder / "odd.json"
    path.write_text(json.dumps(doc))
    read_or_refuse(tp.load, path)
