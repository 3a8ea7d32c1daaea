"""The model against the published large-message nccl-tests figures of REFERENCE.md, with
NCCL's own choice of algorithm and protocol (``algorithm="auto"``)."""

import statistics

import pytest

import topologies as tp
from flowsolver import collective
from topologies import LinkTech, ServerModel

GiB = 2**30


def h800():
    """An H800-like server: 8 NVLink 4 links (200 GB/s per direction, H800 data sheet) at
    NCCL's 20.6 of 25 GB/s per link, the technology passed as an object, never registered."""
    nvlink = LinkTech("h800_nvlink_unregistered", 8 * 25e9, 0.3e-6, 20.6 / 25, "nvlink", "H800: 8 NVLink 4 links")
    return ServerModel("h800_like", gpus=8, layout="nvswitch", gpu="h100_sxm", nvlink=nvlink, nics=8, nic="ib_ndr")


def _busbw(graph, op="all_reduce", ranks=None, algorithm="auto"):
    return collective(graph, op, 8 * GiB, ranks=ranks, algorithm=algorithm).busbw / 1e9


def cases():
    one = tp.rail_optimized(nodes=1)
    out = [("8 x H100 NVLS (default)", _busbw(one), 480.0),
           ("8 x H100 ring", _busbw(one, algorithm="ring"), 367.5)]
    for n, want in ((2, 370.0), (3, 370.0), (4, 370.0), (5, 420.0), (6, 440.0), (7, 460.0)):
        out.append((f"{n} x H100 (NVLS from 5)", _busbw(one, ranks=range(n)), want))
    out.append(("8 x H800 NVLS", _busbw(tp.rail_optimized(nodes=1, server=h800())), 215.0))
    for nodes in (2, 4, 8):
        a100 = tp.rail_optimized(nodes=nodes, server="dgx_a100", link="ib_hdr")
        out.append((f"{nodes} x DGX-A100 HDR ring", _busbw(a100, algorithm="ring"), 192.0))
    return out


def test_published_large_message_figures_stay_within_five_percent_median():
    rows = cases()
    errors = [abs(got - want) / want for _, got, want in rows]
    assert statistics.median(errors) <= 0.05, rows
    assert max(errors) <= 0.15, rows


def test_a_linktech_object_keeps_its_efficiency():
    # NVLS on the H800-like server: 2 (p-1)/p x 200 x 0.824 x 0.85 / (1 + 1/8) = 218 GB/s
    # (was 264 when the unregistered technology's efficiency was lost)
    g = tp.rail_optimized(nodes=1, server=h800())
    r = collective(g, "all_reduce", 8 * GiB, algorithm="nvls")
    assert r.busbw / 1e9 == pytest.approx(1.75 * 200 * 20.6 / 25 * 0.85 / 1.125, rel=0.01)
