"""topologies.from_nccl_xml: which GPU part a dump's PCI device ids name, and which NICs set
the server's NIC rate and ports."""

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver._nccl_log import device_gpu

from ..reader_checks import raises_clearly


def _write(tmp_path, body, name="topo.xml"):
    path = tmp_path / name
    path.write_text(f'<system version="1"><cpu numaid="0" vendor="GenuineIntel">{body}</cpu></system>')
    return path


def _pci(busid, cls, inner="", device=None):
    dev = f' vendor="0x10de" device="{device}"' if device else ""
    return (f'<pci busid="{busid}" class="{cls}"{dev} link_speed="32.0 GT/s PCIe" '
            f'link_width="16">{inner}</pci>')


def _nic(busid, speed=400000, ports=1):
    nets = "".join(f'<net name="mlx5_{busid[5:7]}{p}" dev="{p}" speed="{speed}" port="{p + 1}"/>'
                   for p in range(ports))
    return _pci(busid, "0x020700", f"<nic>{nets}</nic>")


def _rail(k, device=None, sm="90", speed=400000, ports=1):
    """PCIe switch k holding GPU k and its rail NIC."""
    gpu = _pci(f"0000:{k}1:00.0", "0x030200", f'<gpu dev="{k}" sm="{sm}" rank="{k}" gdr="1"/>', device)
    return _pci(f"0000:{k}0:00.0", "0x060400", gpu + _nic(f"0000:{k}2:00.0", speed, ports))


def _server(tmp_path, device, sm, **kw):
    return tp.from_nccl_xml(_write(tmp_path, _rail(1, device, sm) + _rail(2, device, sm)), **kw)


# -- the GPU part: PCI device id (vendor 10de), names as pci.ids gives them -------------------
@pytest.mark.parametrize("device, sm, part", [
    ("0x20b0", "80", "a100_40gb"),     # pci.ids 10de:20b0 "GA100 [A100 SXM4 40GB]"
    ("0x20b2", "80", "a100_sxm"),      # "GA100 [A100 SXM4 80GB]"
    ("0x2330", "90", "h100_sxm"),      # "GH100 [H100 SXM5 80GB]"
    ("0x2941", "100", "gb200"),        # "GB100 [HGX GB200]"
    # "GH100 [H100L 94GB]", the H100 NVL: the part the nccl-tests reader takes its name for
    ("0x2321", "90", device_gpu("NVIDIA H100 NVL")[0][0]),
])
def test_the_pci_device_id_names_the_part(tmp_path, device, sm, part):
    m = _server(tmp_path, device, sm, nvlink="none")
    assert m.gpu == part and f"10de:{device[2:]}" in m.description


def test_an_a100_40gb_dump_has_40_gib_per_gpu(tmp_path):
    # the A100 SXM4 40GB's memory as the driver reports it: 40,960 MiB (not the 80 GB part's 81,920)
    assert _server(tmp_path, "0x20b0", "80", nvlink="none").gpu_spec.memory == 40960 * 2**20


@pytest.mark.parametrize("device, sm", [("0x20b7", "80"),     # pci.ids "GA100GL [A30 PCIe]", 24 GB
                                        ("0x2329", "90"),     # "GH100 [H20]", 148 TF dense BF16
                                        ("0x233b", "90"),     # "GH100 [H200 NVL]"
                                        ("0x2324", "90"),     # "GH100 [H800]"
                                        ("0x1234", "90")])    # no NVIDIA GPU this reader knows
def test_a_device_id_of_no_catalogue_part_is_refused_until_gpu_is_given(tmp_path, device, sm):
    path = _write(tmp_path, _rail(1, device, sm) + _rail(2, device, sm))
    raises_clearly(lambda p: tp.from_nccl_xml(p, nvlink="none"), path, f"10de:{device[2:]}", "gpu=")
    assert tp.from_nccl_xml(path, nvlink="none", gpu="h100_pcie").gpu == "h100_pcie"


def test_a_device_id_that_contradicts_sm_is_refused(tmp_path):
    # 10de:20b0 is an Ampere A100 (sm 80), not a Hopper part
    path = _write(tmp_path, _rail(1, "0x20b0", "90") + _rail(2, "0x20b0", "90"))
    raises_clearly(lambda p: tp.from_nccl_xml(p, nvlink="none"), path, "10de:20b0", "sm 90")


def test_without_a_device_id_sm_gives_the_part_and_says_so(tmp_path):
    m = _server(tmp_path, None, "80", nvlink="none")
    assert m.gpu == "a100_sxm" and "from sm 80" in m.description


# -- NIC rate and ports: the rails' NICs, not a front-end NIC no GPU is paired with ---------
@pytest.mark.parametrize("speed, ports", [(100000, 1), (400000, 1), (25000, 2)])
def test_a_front_end_nic_does_not_lower_the_rails(tmp_path, speed, ports):
    rails = _rail(1, ports=2) + _rail(2, ports=2)
    plain = tp.from_nccl_xml(_write(tmp_path, rails, "plain.xml"), nvlink="nvlink4")
    front = _nic("0000:e1:00.0", speed, ports)            # under the CPU: no GPU is nearest to it
    m = tp.from_nccl_xml(_write(tmp_path, rails + front, "front.xml"), nvlink="nvlink4")
    # each rail NIC: 2 ports of 400,000 Mb/s = 2 x 50e9 bytes/s, as the file says
    assert m.nics == 3 and m.nic_ports == 2 and tp.get_link(m.nic).bandwidth == 400000e6 / 8
    g = tp.rail_optimized(2, server=m)
    leaf = next(v for v in g.successors("s0/nic0") if g.nodes[v]["kind"] == "switch")
    assert g["s0/nic0"][leaf]["capacity"] == pytest.approx(2 * 400000e6 / 8)
    assert f"{ports} port(s) at {speed} Mb/s" in m.description
    # it carries no collective traffic, so the time is the server's without it
    t = [fs.collective(tp.rail_optimized(2, server=s), "all_reduce", 2**28, algorithm="ring").time
         for s in (plain, m)]
    assert t[1] == pytest.approx(t[0], rel=1e-9)


def test_a_slower_rail_nic_still_sets_the_rate(tmp_path):
    # two NICs each nearest a GPU: the slower one's rate is the server's (as before), noted
    path = _write(tmp_path, _rail(1, speed=400000) + _rail(2, speed=200000))
    m = tp.from_nccl_xml(path, nvlink="nvlink4")
    assert tp.get_link(m.nic).bandwidth == 200000e6 / 8 and "the slowest" in m.description
