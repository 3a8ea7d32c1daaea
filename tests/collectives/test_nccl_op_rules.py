"""NCCL's rules of which algorithm / protocol runs an op, checked against NCCL's source
(master 5067397c unless a tag is named): NVLS's arity limit (enqueue.cc:2004-2006), the
reduction op and data type (device.h ncclNvlsSupported), the NVLink latency row of GPUs joined
straight by NVLink (tuning.cc intraHw), LL128's path rule (tuning.cc:518-535)."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives._nccl_model import Hardware, enabled


def test_nvls_all_gather_reduce_scatter_off_above_32_local_ranks():
    """enqueue.cc:2004-2006: NVLS / NVLSTree skipped for every op but AllReduce where
    localRanks > NCCL_MAX_NVLS_ARITY (32, device.h:213); an NVL72 rack is one node."""
    for op in ("all_gather", "reduce_scatter"):
        assert enabled("nvls", "Simple", op, Hardware(32, 1, "blackwell", channels=32, nvls=True))
        assert not enabled("nvls", "Simple", op, Hardware(33, 1, "blackwell", channels=32, nvls=True))
    assert enabled("nvls", "Simple", "all_reduce", Hardware(72, 1, "blackwell", channels=32, nvls=True))
    g = tp.rail_optimized(1, server="nvl72")
    r = collective(g, "all_gather", 64 << 20, ranks=list(range(72)))
    assert r.algorithm != "nvls" and not any(k.startswith("nvls") for k in r.estimates)
    with pytest.raises(ValueError, match="nvls"):
        collective(g, "reduce_scatter", 64 << 20, ranks=list(range(48)), algorithm="nvls")
    assert collective(g, "all_gather", 64 << 20, ranks=list(range(32)), algorithm="nvls").algorithm == "nvls"
