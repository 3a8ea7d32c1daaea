import networkx as nx
import pytest

import topologies as tp
from topologies import ServerModel, get_server

from ..helpers import kind_count


def _one(server, link="ib_ndr"):
    return tp.rail_optimized(1, server=server, link=link)


def test_dgx_h100_internals():
    g = _one("dgx_h100")
    assert kind_count(g, "gpu") == 8 and kind_count(g, "nic") == 8 and kind_count(g, "nvswitch") == 1
    for i in range(8):
        assert g["s0/gpu%d" % i]["s0/nvswitch"]["capacity"] == 450e9  # 18 x 25 GB/s
        assert g["s0/gpu%d" % i]["s0/nic%d" % i]["tech"] == "pcie5"
        assert g.nodes["s0/gpu%d" % i]["rail"] == i


@pytest.mark.parametrize("server,nvlink,nic_rate", [
    ("dgx_a100", 300e9, 25e9), ("dgx_h100", 450e9, 50e9), ("dgx_h200", 450e9, 50e9), ("dgx_b200", 900e9, 50e9)])
def test_nvlink_servers_on_a_fabric(server, nvlink, nic_rate):
    g = tp.rail_optimized(2, server=server, link="ib_ndr")
    assert g["s1/gpu3"]["s1/nvswitch"]["capacity"] == nvlink
    # an HDR NIC on an NDR fabric runs at HDR
    assert g["s1/nic3"]["su0/leaf3"]["capacity"] == nic_rate


def test_dgx_h200_is_the_dgx_h100_with_h200_gpus():
    # DGX BasePOD RA: the same system as the DGX H100 (4 NVSwitch, 8 single-port CX-7 400G,
    # PCIe 5) with 8 H200: 141 GB HBM3e each, 143,771 MiB as nvidia-smi reports an H200 SXM
    h100, h200 = _one("dgx_h100"), _one("dgx_h200")
    assert sorted(h100.edges) == sorted(h200.edges)
    assert all(h100.edges[e]["capacity"] == h200.edges[e]["capacity"] for e in h100.edges)
    spec = get_server("dgx_h200").gpu_spec
    assert spec.memory == 143771 * 2**20 and spec.hbm_bandwidth == 4.8e12
    assert spec.peak_bf16_flops == get_server("dgx_h100").gpu_spec.peak_bf16_flops == 989e12


def test_gpu_to_gpu_inside_a_server_stays_on_nvlink():
    g = tp.rail_optimized(2, server="dgx_h100")
    for path in nx.all_shortest_paths(g, "s0/gpu1", "s0/gpu6"):
        assert path == ["s0/gpu1", "s0/nvswitch", "s0/gpu6"]


def test_nvl72_is_one_nvlink_domain_over_18_trays():
    g = _one("nvl72")
    assert kind_count(g, "gpu") == 72 and kind_count(g, "nvswitch") == 1
    assert len({d["tray"] for _, d in g.nodes(data=True) if d["kind"] == "gpu"}) == 18
    assert g["s0/gpu71"]["s0/nvswitch"]["capacity"] == 900e9
    assert nx.shortest_path_length(g, "s0/gpu0", "s0/gpu71") == 2


def test_pcie_server_layout():
    g = _one("pcie_8gpu")
    assert kind_count(g, "nvswitch") == 0
    assert kind_count(g, "pcie_switch") == 4 and kind_count(g, "cpu") == 2
    assert not any(d["tech"].startswith("nvlink") for _, _, d in g.edges(data=True))
    # two GPUs under one switch talk through it; across sockets through both CPUs
    assert nx.shortest_path(g, "s0/gpu0", "s0/gpu1") == ["s0/gpu0", "s0/pcie0", "s0/gpu1"]
    assert nx.shortest_path(g, "s0/gpu0", "s0/gpu7") == [
        "s0/gpu0", "s0/pcie0", "s0/cpu0", "s0/cpu1", "s0/pcie3", "s0/gpu7"]
    # the NICs sit on the PCIe switches next to their GPUs
    assert g.has_edge("s0/nic0", "s0/pcie0") and g.has_edge("s0/nic7", "s0/pcie3")


def test_single_gpu_host_is_the_default_endpoint():
    g = tp.fat_tree(4)
    assert kind_count(g, "gpu") == 16 and kind_count(g, "nic") == 16
    assert g["s0/gpu0"]["s0/nic0"]["tech"] == "pcie5"


def test_custom_server_object():
    model = ServerModel("quad", gpus=4, layout="nvswitch", gpu="h100_sxm", nvlink="nvlink4",
                        nics=2, nic="ib_ndr")
    g = tp.fat_tree(4, server=model)
    assert kind_count(g, "gpu") == 4 * 8  # 16 ports / 2 NICs = 8 servers
    # GPU 1 shares GPU 0's NIC and reaches it over NVLink, not over a PCIe shortcut
    assert nx.shortest_path(g, "s0/gpu1", "s0/nic0") == ["s0/gpu1", "s0/nvswitch", "s0/gpu0", "s0/nic0"]


def test_server_errors():
    with pytest.raises(ValueError, match="unknown server 'dgx_h300'.*dgx_h100"):
        get_server("dgx_h300")
    with pytest.raises(ValueError, match="unknown server"):
        tp.rail_optimized(4, server="nope")
    with pytest.raises(ValueError, match="gpus must be an integer >= 1"):
        ServerModel("x", gpus=0, layout="nvswitch", nvlink="nvlink4")
    with pytest.raises(ValueError, match="needs nvlink"):
        ServerModel("x", gpus=8, layout="nvswitch")
    with pytest.raises(ValueError, match="layout must be one of"):
        ServerModel("x", gpus=8, layout="mesh")
    with pytest.raises(ValueError, match="nvlink: unknown link technology"):
        ServerModel("x", gpus=8, layout="nvswitch", nvlink="nvlink9")
