"""SimAI files with dual-ToR GPUs (gen_Topo_Template.py Rail_Opti_DualToR_*: every GPU cabled to
an ASW of each ToR set, Alibaba HPN's NIC of two ports) read as one NIC of two ports whose traffic
ECMP spreads over both; GPU type names without catalogue figures refused; to_simai says when a
type cannot come back."""

import re
import warnings

import numpy as np
import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.traffic import Flows


def _hpn(tmp_path, dual=True, gpus=16, per_server=8, psw=2, port_gbps=200):
    """Rail-optimised dual-ToR file as the generator lays it out: GPUs, one NVSwitch per
    server, ASW set 1 and set 2 (one ASW per rail in each), the PSWs; GPU i to its NVSwitch,
    to ASW i % 8 of set 1 and of set 2; every ASW to every PSW. ``dual=False``: one link of
    twice the rate to set 1 only (the same bandwidth per GPU)."""
    servers = gpus // per_server
    nvs = list(range(gpus, gpus + servers))
    asw1 = list(range(nvs[-1] + 1, nvs[-1] + 1 + per_server))
    asw2 = list(range(asw1[-1] + 1, asw1[-1] + 1 + per_server)) if dual else []
    psws = list(range((asw2 or asw1)[-1] + 1, (asw2 or asw1)[-1] + 1 + psw))
    rows = []
    for i in range(gpus):
        rows.append(f"{i} {nvs[i // per_server]} 2880Gbps 0.000025ms 0")
        if dual:
            rows += [f"{i} {asw1[i % per_server]} {port_gbps}Gbps 0.0005ms 0",
                     f"{i} {asw2[i % per_server]} {port_gbps}Gbps 0.0005ms 0"]
        else:
            rows.append(f"{i} {asw1[i % per_server]} {2 * port_gbps}Gbps 0.0005ms 0")
    rows += [f"{a} {p} 400Gbps 0.0005ms 0" for a in asw1 + asw2 for p in psws]
    switches = nvs + asw1 + asw2 + psws
    head = f"{gpus + len(switches)} {per_server} {servers} {len(switches) - servers} {len(rows)} H100"
    path = tmp_path / ("dual" if dual else "single")
    path.write_text("\n".join([head, " ".join(map(str, switches))] + rows) + "\n")
    return tp.from_simai(path)


def test_a_dual_tor_gpu_has_one_nic_of_two_ports(tmp_path):
    g = _hpn(tmp_path)
    nics = [n for n, d in g.nodes(data=True) if d["kind"] == "nic"]
    assert len(nics) == 16                                   # one per GPU, not one per link
    ports = sorted(v for v in g.successors("s1/nic3") if g.nodes[v]["kind"] == "switch")
    assert len(ports) == 2 and all(g["s1/nic3"][v]["capacity"] == 200e9 / 8 for v in ports)
    # the GPU side of the NIC carries both ports: 2 x 200 Gb/s = 50 GB/s
    assert g["s1/gpu3"]["s1/nic3"]["capacity"] == g["s1/nic3"]["s1/gpu3"]["capacity"] == 2 * 200e9 / 8
    assert any("several switches" in note for note in g.graph["notes"])


def test_dual_tor_gives_a_gpu_both_ports(tmp_path):
    # server 0 -> server 1, GPU to GPU of the same rail: each GPU has 2 x 200 Gb/s = 50 GB/s to the
    # fabric, as a single 400 Gb/s link gives (one port alone: 25 GB/s)
    flows = Flows(np.arange(8), np.arange(8) + 8, 1.0)
    dual, single = _hpn(tmp_path), _hpn(tmp_path, dual=False)
    for g in (dual, single):
        rates = np.asarray(fs.max_min_fair(fs.routing.route(g, flows)).rates)
        assert rates == pytest.approx(np.full(8, 2 * 200e9 / 8), rel=1e-9)
    a, b = (fs.collective(g, "all_to_all", 2**30).time for g in (dual, single))
    assert a == pytest.approx(b, rel=1e-9)


def test_ecmp_splits_a_dual_tor_flow_over_its_nearest_switches(tmp_path):
    g = _hpn(tmp_path)

    def fractions(src, dst):
        rm = fs.routing.route(g, Flows([src], [dst], 1.0))
        links, fracs = rm.column(0)
        return {(str(rm.links.src[i]), str(rm.links.dst[i])): f for i, f in zip(links, fracs)}

    # same rail (GPU 0 -> GPU 8): both ToRs serve both NICs; the two shortest paths NIC -> ASW ->
    # NIC take half each and no PSW is crossed
    same = fractions(0, 8)
    ups = {k: f for k, f in same.items() if k[0] == "s0/nic0"}
    downs = {k: f for k, f in same.items() if k[1] == "s1/nic0"}
    assert sorted(ups.values()) == pytest.approx([0.5, 0.5]) and sorted(downs.values()) == pytest.approx([0.5, 0.5])
    assert not [k for k in same if g.nodes[k[0]].get("role") == "spine" or g.nodes[k[1]].get("role") == "spine"]
    # another rail (GPU 0 -> GPU 9): every ASW pair is 2 hops apart, so half on each port, each
    # ASW's half over its 2 PSWs (1/4 a link), half into each port of the destination
    other = fractions(0, 9)
    to_spine = [f for k, f in other.items() if g.nodes[k[1]].get("role") == "spine"]
    assert sorted(to_spine) == pytest.approx([0.25] * 4)
    assert sorted(f for k, f in other.items() if k[1] == "s1/nic1") == pytest.approx([0.5, 0.5])


def test_a_gpu_type_without_figures_is_refused_not_substituted(tmp_path):
    path = tmp_path / "h20"
    path.write_text("4 2 1 1 4 H20\n2 3\n0 2 2880Gbps 0.000025ms 0\n1 2 2880Gbps 0.000025ms 0\n"
                    "0 3 400Gbps 0.0005ms 0\n1 3 400Gbps 0.0005ms 0\n")
    with pytest.raises(ValueError, match=r"GPU type 'H20'.*pass gpu="):
        tp.from_simai(path)
    g = tp.from_simai(path, gpu="h100_sxm")          # the user's explicit choice
    assert {g.nodes[n]["gpu_type"] for n in tp.gpus(g)} == {"h100_sxm"}


def test_an_h100_pcie_written_as_h100_says_how_to_read_it_back(tmp_path):
    g = tp.rail_optimized(2, server="pcie_8gpu")
    with warnings.catch_warnings(record=True) as caught:     # (also: its PCIe switches are not in the format)
        warnings.simplefilter("always")
        path = tp.to_simai(g, tmp_path / "pcie")
    assert any(re.search(r"h100_pcie.*gpu='h100_pcie'", str(w.message)) for w in caught)
    back = tp.from_simai(path, gpu="h100_pcie")
    assert {back.nodes[n]["gpu_type"] for n in tp.gpus(back)} == {"h100_pcie"}
