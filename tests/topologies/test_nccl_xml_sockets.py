"""from_nccl_xml's CPU sockets: each GPU's socket and the Intel make NCCL reads from <cpu familyid
modelid>, which bound NCCL's rings through a two-socket PCIe server (topo.cc ncclTopoGetInterCpuBw)."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._hardware import describe
from flowsolver.collectives._layout import participants

from .test_nccl_xml import AZURE, OCI, _gpu, _nic, _pci, _shared, _write


def _cpu(numaid, inner, family="6", model="143", vendor="GenuineIntel"):
    ids = "" if family is None else f' familyid="{family}" modelid="{model}"'
    return f'<cpu numaid="{numaid}" arch="x86_64" vendor="{vendor}"{ids}>{inner}</cpu>'


def _pcie_8gpu(**ids):
    """pcie_8gpu's shape: two sockets, two PCIe switches a socket, 2 H100 PCIe + 2 NICs a switch."""
    sockets = []
    for c in range(2):
        switches = "".join(_pci(f"0000:{c}{s}:00.0", "0x060400",
                                "".join(_gpu(f"0000:{c}{s}:{i + 1:02d}.0", 4 * c + 2 * s + i) for i in range(2))
                                + "".join(_nic(f"0000:{c}{s}:{i + 5:02d}.0") for i in range(2)))
                           for s in range(2))
        sockets.append(_cpu(c, switches, **ids))
    return "".join(sockets)


def _counts(server, nodes):
    """(NCCL's ring graph channels, the channels it runs) of an all-reduce over every GPU."""
    g = tp.rail_optimized(nodes, server=server)
    hw = describe(g, *participants(g, "all_reduce", None, None))
    return hw.graph_channels, hw.channels


def test_a_two_socket_pcie_dump_is_bound_by_its_socket_link_as_pcie_8gpu(tmp_path):
    m = tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu()), gpu="h100_pcie", nvlink="none")
    g = tp.rail_optimized(1, server=m)
    # each GPU's socket is the <cpu> it hangs off; familyid 6 modelid 143 (0x8F) is Sapphire Rapids
    assert [g.nodes[f"s0/gpu{i}"]["socket"] for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert m.cpu_make == "sapphire_rapids" and {g.nodes[f"s0/gpu{i}"]["cpu_make"] for i in range(8)} == {
        "sapphire_rapids"}
    # commit 004da71's derivation for pcie_8gpu (tests/collectives/test_channels.py): SPR_QPI_BW 22 (topo.h);
    # two nodes, rings(s) = min(8 NICs, 2 floor(22 / s)) over sm90's inter speeds: none at 48 .. 24, 2 at 22,
    # no doubling (22 < 25): 2 graph, 4 run (8 / 16 without the socket link); one node 2 / 4 as well
    assert _counts(m, 2) == _counts("pcie_8gpu", 2) == (2, 4)
    assert _counts(m, 1) == (2, 4)
    # the same server: the same all-reduce as the catalogue's
    times = [fs.collective(tp.rail_optimized(2, server=s), "all_reduce", 256 << 20, algorithm="ring").time
             for s in (m, "pcie_8gpu")]
    assert times[0] == pytest.approx(times[1], rel=1e-9)


def test_a_socket_of_four_gpus_and_one_nic_each(tmp_path):
    """review16's two_socket.xml: 4 H100 PCIe and a NIC under each socket's one switch: rings(s) =
    min(2 NICs, 2 floor(22 / s)): 2 at 22, run 4 (4 / 8 without the socket link)."""
    body = "".join(_cpu(c, _pci(f"0000:{c}0:00.0", "0x060400",
                                "".join(_gpu(f"0000:{c}{i + 1}:00.0", 4 * c + i) for i in range(4))
                                + _nic(f"0000:{c}9:00.0"))) for c in range(2))
    m = tp.from_nccl_xml(_write(tmp_path, body), gpu="h100_pcie", nvlink="none")
    assert _counts(m, 2) == (2, 4)


@pytest.mark.parametrize("family, model, make", [
    # topo.cc:748-751: family 6 and model >= 0xCF ERP, >= 0x8F SRP, >= 0x55 SKL, else BDW; strtol base 0 (xml.h:115)
    ("6", "207", "emerald_rapids"), ("6", "0xcf", "emerald_rapids"), ("6", "206", "sapphire_rapids"),
    ("6", "0x8F", "sapphire_rapids"), ("6", "142", "skylake"), ("6", "85", "skylake"), ("6", "84", "broadwell"),
    ("6", "0125", "skylake"),           # octal 0125 = 85
    ("15", "207", "broadwell"),         # another family: NCCL's default
])
def test_the_intel_make_is_read_as_ncclss_rules(tmp_path, family, model, make):
    m = tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu(family=family, model=model)), gpu="h100_pcie", nvlink="none")
    assert m.cpu_make == make and f"CPU make {make}" in m.description


def test_a_skylake_dump_holds_ncclss_skylake_rings_on_one_node(tmp_path):
    # SKL_QPI_BW 10 (topo.h), one node: rings(s) = min(floor(48 / s), floor(10 / s)) over sm90's intra speeds: none
    # at 40 .. 11, 1 at 6, 3 at 3 (9, best; 3 / 6 > .49): 3 graph, 6 run (commit 004da71); 2 / 4 with no socket link
    m = tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu(model="85")), gpu="h100_pcie", nvlink="none")
    assert _counts(m, 1) == _counts(tp.get_server("pcie_8gpu").with_(cpu_make="skylake"), 1) == (3, 6)


def test_no_ids_an_amd_host_and_bad_ids(tmp_path):
    m = tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu(family=None)), gpu="h100_pcie", nvlink="none")
    assert m.cpu_make is None and "Intel CPU make not in the file" in m.description
    # an Intel make NCCL does not know: BDW_QPI_BW 6; two nodes: 2 at 6 (12), 4 at 3 (12, not more): 2 / 4
    assert _counts(m, 2) == (2, 4)
    amd = tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu(vendor="AuthenticAMD", family="25", model="17")),
                           gpu="h100_pcie", nvlink="none")
    assert (amd.cpu, amd.cpu_make) == ("amd", None)
    for bad in ("six", "-6", "6.0", ""):
        with pytest.raises(ValueError, match=r'topo\.xml: <cpu numaid="0">: familyid must be a non-negative integer'):
            tp.from_nccl_xml(_write(tmp_path, _pcie_8gpu(family=bad)), gpu="h100_pcie", nvlink="none")


def test_one_socket_is_no_socket_link(tmp_path):
    """Every GPU under one socket: no ring crosses a socket link, whatever the make (a Broadwell's 6 GB/s
    would give 2 / 4 across two nodes): 8 NICs, rings(s) = 8 at 48 (NIC 50, PCIe 48), doubled: 8 / 16."""
    one = _pcie_8gpu(model="61").replace('</cpu><cpu numaid="1" arch="x86_64" vendor="GenuineIntel" '
                                         'familyid="6" modelid="61">', "")
    m = tp.from_nccl_xml(_write(tmp_path, one), gpu="h100_pcie", nvlink="none")
    assert m.cpu_make == "broadwell" and "1 CPU socket(s)" in m.description
    assert _counts(m, 2) == (8, 16)


def test_the_shared_dumps_keep_their_channels():
    """OCI's and Azure's H100 dumps: two Sapphire Rapids sockets (familyid 6, modelid 143), 4 GPUs each.
    Behind an NVSwitch the socket link bounds no ring: the catalogue DGX H100's counts. Azure's PCI skeleton
    read as PCIe only (nvlink='none') is a two-socket PCIe server: pcie_8gpu's 2 / 4 across nodes."""
    for server in (tp.from_nccl_xml(_shared(OCI)), tp.from_nccl_xml(_shared(AZURE), gpu="h100_sxm", nvlink="nvlink4")):
        g = tp.rail_optimized(1, server=server)
        assert [g.nodes[f"s0/gpu{i}"]["socket"] for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
        assert server.cpu_make == "sapphire_rapids"
        assert [_counts(server, n) for n in (1, 2)] == [_counts("dgx_h100", n) for n in (1, 2)] == [(12, 24), (8, 16)]
    pcie = tp.from_nccl_xml(AZURE, gpu="h100_sxm", nvlink="none")
    assert [_counts(pcie, n) for n in (1, 2)] == [(2, 4), (2, 4)]


def test_a_two_socket_nvlink_mesh_dump_keeps_its_rings_off_the_socket_link(tmp_path):
    # 4 A100 joined pairwise by 4 NVLinks, 2 GPUs and 2 HDR NICs under each of two Sapphire Rapids
    # sockets: NCCL's rings run GPU to GPU over NVLink and leave each node through a NIC, never
    # across the socket link, so 2 nodes keep the rings the mesh had before the
    # dumps carried sockets: 4 graph / 8 run channels (the socket bound would make it 2 / 4)
    from flowsolver.collectives._hardware import describe
    from flowsolver.collectives._layout import participants

    def pci(busid, cls, inner=""):
        return f'<pci busid="{busid}" class="{cls}" link_speed="16.0 GT/s PCIe" link_width="16">{inner}</pci>'
    bus = [f"0000:{c}{i + 1}:00.0" for c in range(2) for i in range(2)]

    def gpu(k):
        links = "".join(f'<nvlink target="{b}" count="4" tclass="0x030200"/>' for b in bus if b != bus[k])
        return pci(bus[k], "0x030200", f'<gpu dev="{k}" sm="80" rank="{k}" gdr="1">{links}</gpu>')

    def nic(busid):
        return pci(busid, "0x020700", f'<nic><net name="mlx5_{busid[5:7]}" dev="0" speed="200000" port="1"/></nic>')
    sockets = "".join(
        f'<cpu numaid="{c}" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">'
        f'{pci(f"0000:{c}0:00.0", "0x060400", gpu(2 * c) + gpu(2 * c + 1) + nic(f"0000:{c}8:00.0") + nic(f"0000:{c}9:00.0"))}</cpu>'
        for c in range(2))
    path = tmp_path / "mesh.xml"
    path.write_text(f'<system version="1">{sockets}</system>')
    server = tp.from_nccl_xml(path, gpu="a100_sxm")
    g = tp.rail_optimized(2, server=server, link="ib_hdr")
    hw = describe(g, *participants(g, "all_reduce", None, None))
    assert (hw.graph_channels, hw.channels) == (4, 8)
