"""topologies.from_nccl_xml: the shared real NCCL topology files and small files written here."""

import json
import re
from pathlib import Path

import networkx as nx
import pytest

import flowsolver as fs
import topologies as tp

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-topo"
OCI = DATA / "oci_BM.GPU.H100.8_topology.xml"
AZURE = DATA / "azure_ndv5-topo.xml"
PCIE5_X16 = 16 * 32e9 * 128 / 130 / 8          # PCI-SIG 5.0: 32 GT/s x16, 128b/130b, bytes/s


def _shared(path):
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data: optional data, not shipped; docs/guide/data.md)")
    return path


def _write(tmp_path, body, name="topo.xml"):
    path = tmp_path / name
    path.write_text(f'<system version="1">{body}</system>')
    return path


def _pci(busid, cls, inner="", speed="32.0 GT/s PCIe", width="16"):
    return (f'<pci busid="{busid}" class="{cls}" link_speed="{speed}" link_width="{width}">'
            f"{inner}</pci>")


def _gpu(busid, rank, nvlinks="", sm="90"):
    return _pci(busid, "0x030200", f'<gpu dev="{rank}" sm="{sm}" rank="{rank}" gdr="1">{nvlinks}</gpu>')


def _nic(busid, speed="400000", cls="0x020700", ports=1):
    nets = "".join(f'<net name="mlx5_{busid[5:7]}{p}" dev="{p}" speed="{speed}" port="{p + 1}"/>'
                   for p in range(ports))
    return _pci(busid, cls, f"<nic>{nets}</nic>")


def _box(inner):
    """One socket with one PCIe switch holding ``inner``."""
    return f'<cpu numaid="0" vendor="GenuineIntel">{_pci("0000:01:00.0", "0x060400", inner)}</cpu>'


# -- the real dumps ------------------------------------------------------------------------
def test_oci_h100_dump_reads_as_its_machine():
    text = _shared(OCI).read_text()
    m = tp.from_nccl_xml(OCI)
    assert m.gpus == text.count("<gpu ") == 8 and m.nics == text.count("<nic>") == 8
    assert m.nic_ports == 2 and m.gpu == "h100_sxm" and m.layout == "nvswitch"
    # every GPU's <nvlink> counts to NVSwitches sum to 18 links of 25 GB/s (NVLink 4)
    counts = [int(c) for c in re.findall(r'<nvlink target="[^"]+" count="(\d+)"', text)]
    assert sum(counts) == 8 * 18
    g = tp.rail_optimized(2, server=m, link="roce_400g")
    tp.validate(g)
    for i in range(8):
        assert g[f"s1/gpu{i}"]["s1/nvswitch"]["capacity"] == pytest.approx(18 * 25e9)
    # the file's port speed is 180000 Mb/s; each NIC's two ports are two cables to its leaf
    port = 180000 * 1e6 / 8
    (leaf,) = [v for v in g.successors("s0/nic3") if g.nodes[v]["kind"] == "switch"]
    assert g["s0/nic3"][leaf]["capacity"] == pytest.approx(2 * port)
    assert g["s0/nic3"][leaf]["cables"] == 2
    assert "180000 Mb/s" in m.description and "4 NVSwitch chip(s)" in m.description


def test_oci_rails_follow_the_pci_tree():
    import xml.etree.ElementTree as ET

    text = _shared(OCI).read_text()
    m = tp.from_nccl_xml(OCI)
    g = tp.rail_optimized(1, server=m)
    # in the file, each GPU and one NIC hang off one top-level PCIe switch of a socket
    groups = []
    root = ET.fromstring(text.strip())
    for cpu in root:
        for top in cpu:
            found = {p.get("class"): p.get("busid") for p in top.iter("pci")}
            groups.append(found)
    pairs = {v["0x030200"]: v["0x020000"] for v in groups}
    assert len(pairs) == 8
    for i in range(8):
        gpu = g.nodes[f"s0/gpu{i}"]
        nic = g.nodes[f"s0/nic{gpu['rail']}"]
        assert pairs[gpu["busid"]] == nic["busid"]
        # GPU -> NIC stays under the PCIe switch at Gen 5 x16
        path = nx.shortest_path(g, f"s0/gpu{i}", f"s0/nic{gpu['rail']}")
        assert all(g[u][v]["capacity"] == pytest.approx(PCIE5_X16) for u, v in zip(path, path[1:]))
        assert not any(g.nodes[n]["kind"] == "cpu" for n in path)


def test_oci_collectives_match_a_hand_built_equivalent():
    """The dump's server and a ServerModel written by hand with the same NVLink and NIC
    rates give the same collective times (up to the dump's longer PCIe path latency)."""
    m = tp.from_nccl_xml(_shared(OCI))
    nic = tp.LinkTech("doc_roce_360g", 2 * 180000e6 / 8, tp.get_link("roce_400g").latency,
                      tp.get_link("roce_400g").efficiency, "roce")      # RoCE v2 at any rate: 0.927
    hand = tp.ServerModel("doc_oci", gpus=8, layout="nvswitch", gpu="h100_sxm", nvlink="nvlink4",
                          nics=8, nic=nic)
    one = [fs.collective(tp.rail_optimized(1, server=s), "all_reduce", 2**30, algorithm="ring").time
           for s in (m, hand)]
    assert one[0] == pytest.approx(one[1], rel=1e-9)
    two = [fs.collective(tp.rail_optimized(2, server=s, link="roce_400g"), "all_reduce", 2**32,
                         algorithm="ring").time for s in (m, hand)]
    assert two[0] == pytest.approx(two[1], rel=5e-3)


def test_oci_sends_size_their_channels_from_nics_behind_nested_switches():
    """OCI's GPUs reach their NICs through three PCIe switches (GPU, switch, switch, switch,
    NIC: NCCL's PXB path, still the GPU's local NIC); the hand-built equivalent has them
    behind one. Each send gets the same P2P channels and rate from both (it got 1 channel from
    the dump: no local NIC found, half the hand-built server's busbw across nodes)."""
    m = tp.from_nccl_xml(_shared(OCI))
    nic = tp.LinkTech("doc_roce_360g", 2 * 180000e6 / 8, tp.get_link("roce_400g").latency,
                      tp.get_link("roce_400g").efficiency, "roce")      # RoCE v2 at any rate: 0.927
    hand = tp.ServerModel("doc_oci", gpus=8, layout="nvswitch", gpu="h100_sxm", nvlink="nvlink4", nics=8, nic=nic)
    runs = []
    for s in (m, hand):
        g = tp.rail_optimized(2, server=s, link="roce_400g")
        runs.append([(r.channels, r.busbw) for r in (fs.collective(g, "send_recv", 2**28, ranks=[0, 8]),
                                                   fs.collective(g, "send_recv", 2**28))])
    assert [c for c, _ in runs[0]] == [c for c, _ in runs[1]]
    assert [b for _, b in runs[0]] == pytest.approx([b for _, b in runs[1]], rel=5e-3)


def test_azure_pci_skeleton_needs_the_gpu_type_and_its_nvlink():
    text = _shared(AZURE).read_text()
    with pytest.raises(ValueError, match="gpu="):
        tp.from_nccl_xml(AZURE)
    # NCCL adds NVLinks from the driver to a file without them (src/graph/xml.cc
    # ncclTopoGetXmlFromGpu): the skeleton does not say how its SXM GPUs are joined
    with pytest.raises(ValueError, match="no <nvlink> elements.*8 h100_sxm GPUs.*nvlink=.*'none'"):
        tp.from_nccl_xml(AZURE, gpu="h100_sxm")
    m = tp.from_nccl_xml(AZURE, gpu="h100_sxm", nvlink="none")
    assert "PCIe only" in m.description
    assert m.gpus == text.count('class="0x030200"') == 8 and m.nics == text.count('class="0x020700"')
    assert m.nic is None and "no NIC speed" in m.description
    g = tp.rail_optimized(2, server=m, link="ib_ndr")
    tp.validate(g)
    assert not any(d["kind"] == "nvswitch" for _, d in g.nodes(data=True))
    # NIC cables take the fabric's rate; GPU i and its NIC share PCIe switch i
    assert g["s0/nic0"]["su0/leaf0"]["capacity"] == 50e9
    for i in range(8):
        nic = f"s0/nic{g.nodes[f's0/gpu{i}']['rail']}"
        assert nx.shortest_path_length(g, f"s0/gpu{i}", nic) == 2
    r = fs.collective(g, "all_gather", 2**28)
    assert r.time > 0 and r.status == fs.Status.OK


def test_azure_with_declared_nvlink_is_a_dgx_h100_inside():
    m = tp.from_nccl_xml(_shared(AZURE), gpu="h100_sxm", nvlink="nvlink4")
    assert m.layout == "nvswitch" and "nvlink argument" in m.description
    times = [fs.collective(tp.rail_optimized(1, server=s), "all_reduce", 2**30, algorithm=a).time
             for a in ("ring", "nvls") for s in (m, "dgx_h100")]
    assert times[0] == pytest.approx(times[1], rel=1e-9) and times[2] == pytest.approx(times[3], rel=1e-9)


def test_every_shared_dump_reads_as_its_sidecar_describes_it():
    """Each XML file of the shared folder (whatever is added to it) against the machine its
    JSON sidecar records: GPU and NIC counts and ports, usable as a cluster's server."""
    dumps = sorted(_shared(DATA).glob("*.xml"))
    if not dumps:
        pytest.skip(f"no NCCL topology file in {DATA} (../shared/data: optional data, not shipped; docs/guide/data.md)")
    for path in dumps:
        side = json.loads(path.with_suffix(".json").read_text())
        try:
            m = tp.from_nccl_xml(path)
        except ValueError as err:          # a PCI skeleton names no GPU type: the sidecar does
            assert "gpu=" in str(err) and "H100" in side["gpus"]["model"], (path.name, err)
            assert "NVSwitch" in side["gpus"]["nvlink"], path.name
            m = tp.from_nccl_xml(path, gpu="h100_sxm", nvlink="nvlink4")
        nics = side["nics"]
        assert m.gpus == side["gpus"]["count"], path.name
        assert m.nics == nics.get("count", nics.get("count_physical")), path.name
        assert m.nic_ports == nics.get("ports_each", 1), path.name
        g = tp.rail_optimized(2, server=m, link="roce_400g")
        tp.validate(g)
        assert fs.collective(g, "all_reduce", 2**26).status == fs.Status.OK, path.name


# -- small files written here ------------------------------------------------------------
def test_minimal_file_rates_from_the_catalogue(tmp_path):
    body = _box(_gpu("0000:02:00.0", 0) + _nic("0000:03:00.0", "400000") + _nic("0000:06:00.0", "400000")
                + _pci("0000:04:00.0", "0x060400", _gpu("0000:05:00.0", 1), width="8"))
    m = tp.from_nccl_xml(_write(tmp_path, body), nvlink="none")
    assert (m.gpus, m.nics, tp.get_link(m.nic).name) == (2, 2, "ib_ndr")
    # GPU 1 sits under a second switch on an x8 link: it takes the NIC GPU 0 left, and its
    # path there crosses half a Gen 5 x16, the slowest GPU-NIC link
    assert tp.get_link(m.host_link).bandwidth == pytest.approx(PCIE5_X16 / 2)
    g = tp.rail_optimized(1, server=m)
    assert [g.nodes[f"s0/gpu{i}"]["rail"] for i in (0, 1)] == [0, 1]
    assert g.nodes["s0/nic1"]["busid"] == "0000:06:00.0"
    assert g["s0/pcie1"]["s0/pcie0"]["capacity"] == pytest.approx(PCIE5_X16 / 2)
    assert g["s0/pcie1"]["s0/pcie0"]["tech"] == "pcie5"
    assert json.loads(json.dumps(m.to_dict()))["nic"] == "ib_ndr"


@pytest.mark.parametrize("speed,cls,tech", [
    ("8.0 GT/s PCIe", "0x020000", 16 * 8e9 * 128 / 130 / 8),   # Gen 3: 128b/130b
    ("5.0 GT/s PCIe", "0x020000", 16 * 5e9 * 8 / 10 / 8),      # Gen 2: 8b/10b
    ("16.0 GT/s PCIe", "0x020000", 16 * 16e9 * 128 / 130 / 8)])
def test_pcie_generations(tmp_path, speed, cls, tech):
    body = _box(_pci("0000:02:00.0", "0x030200", '<gpu dev="0" sm="90" rank="0"/>', speed=speed)
                + _nic("0000:03:00.0", "200000", cls=cls))
    m = tp.from_nccl_xml(_write(tmp_path, body))
    g = tp.rail_optimized(1, server=m)
    assert g["s0/gpu0"]["s0/pcie0"]["capacity"] == pytest.approx(tech)
    assert tp.get_link(m.nic).name == "roce_200g"      # mlx5 over Ethernet: RoCE


def test_unknown_elements_are_noted_and_ignored(tmp_path):
    body = ("<gpio/>" + _box(_pci("0000:02:00.0", "0x030200",
                                  '<gpu dev="0" sm="90" rank="0"><c2c count="4" bw="32000"/>'
                                  '<nvlink target="0000:aa:00.0" count="2" tclass="0x060000"/></gpu>')
                             + _nic("0000:03:00.0") + _pci("0000:09:00.0", "0x010802")))
    m = tp.from_nccl_xml(_write(tmp_path, body))
    for what in ("<gpio>", "class 0x010802", "<nvlink> to class 0x060000"):
        assert what in m.description
    assert m.gpus == 1 and m.nics == 1
    # <c2c> is read, not ignored: the GPU's chip-to-chip link to its CPU (NCCL's PATH_P2C to a
    # NIC under that CPU, paths.cc), which LL128's default rule reads
    assert "<c2c>" not in m.description
    assert tp.rail_optimized(1, server=m).nodes["s0/gpu0"]["c2c"] is True


def test_direct_gpu_nvlinks_are_gpu_to_gpu_cables(tmp_path):
    a, b = "0000:02:00.0", "0000:05:00.0"
    link = '<nvlink target="{}" count="12" tclass="0x030200"/>'
    body = _box(_gpu(a, 0, link.format(b), sm="80") + _gpu(b, 1, link.format(a), sm="80")
                + _nic("0000:03:00.0", "200000"))
    m = tp.from_nccl_xml(_write(tmp_path, body))
    assert m.gpu == "a100_sxm" and m.layout == "nccl"
    g = tp.rail_optimized(1, server=m)
    assert g["s0/gpu0"]["s0/gpu1"]["capacity"] == pytest.approx(12 * 25e9)   # NVLink 3: 25 GB/s a link
    assert nx.shortest_path(g, "s0/gpu0", "s0/gpu1") == ["s0/gpu0", "s0/gpu1"]
    assert fs.collective(g, "all_reduce", 2**28, algorithm="ring").time > 0


def test_nvswitch_chips_reaching_different_gpus_stay_apart(tmp_path):
    def links(*chips):
        return "".join(f'<nvlink target="{c}" count="9" tclass="0x068000"/>' for c in chips)
    gpus = [_gpu(f"0000:1{i}:00.0", i, links("0000:a1:00.0", "0000:a2:00.0") if i < 2 else
                 links("0000:b1:00.0", "0000:b2:00.0")) for i in range(4)]
    m = tp.from_nccl_xml(_write(tmp_path, _box("".join(gpus) + _nic("0000:03:00.0"))))
    g = tp.rail_optimized(1, server=m)
    assert {n for n, d in g.nodes(data=True) if d["kind"] == "nvswitch"} == {"s0/nvswitch0", "s0/nvswitch1"}
    assert g["s0/gpu1"]["s0/nvswitch0"]["capacity"] == pytest.approx(18 * 25e9)
    assert not g.has_edge("s0/gpu2", "s0/nvswitch0") and m.layout == "nccl"


@pytest.mark.parametrize("body,match", [
    (_box(_gpu("0000:02:00.0", 0, '<nvlink target="0000:77:00.0" count="4" tclass="0x030200"/>')
          + _nic("0000:03:00.0")), "0000:77:00.0"),
    (_box(_gpu("0000:02:00.0", 0, '<nvlink target="0000:a1:00.0" count="19" tclass="0x068000"/>')
          + _nic("0000:03:00.0")), "0000:02:00.0 claims 19 NVLinks"),
    (_box(_gpu("0000:02:00.0", 0) + _gpu("0000:05:00.0", 0) + _nic("0000:03:00.0")), "rank=0"),
    (_box(_gpu("0000:02:00.0", 0)), "no NIC"),
    (_box(_nic("0000:03:00.0")), "no GPU"),
    (_box(_gpu("0000:02:00.0", 0, '<nvlink target="0000:a1:00.0" count="x" tclass="0x068000"/>')
          + _nic("0000:03:00.0")), "count must be an integer"),
])
def test_contradictions_name_the_element(tmp_path, body, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        tp.from_nccl_xml(_write(tmp_path, body))


def test_gpu_links_that_disagree_are_an_error(tmp_path):
    a, b = "0000:02:00.0", "0000:05:00.0"
    body = _box(_gpu(a, 0, f'<nvlink target="{b}" count="12" tclass="0x030200"/>', sm="80")
                + _gpu(b, 1, f'<nvlink target="{a}" count="6" tclass="0x030200"/>', sm="80")
                + _nic("0000:03:00.0"))
    with pytest.raises(ValueError, match="disagree"):
        tp.from_nccl_xml(_write(tmp_path, body))


def test_bad_files_and_arguments(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<system><cpu>")
    with pytest.raises(ValueError, match="well-formed"):
        tp.from_nccl_xml(bad)
    other = tmp_path / "other.xml"
    other.write_text("<graphs/>")
    with pytest.raises(ValueError, match="<system>"):
        tp.from_nccl_xml(other)
    ok = _write(tmp_path, _box(_gpu("0000:02:00.0", 0) + _nic("0000:03:00.0")))
    with pytest.raises(ValueError, match="nvlink must be one of"):
        tp.from_nccl_xml(ok, nvlink="nvlink9")


def test_usable_by_name_and_on_every_family(tmp_path):
    body = _box("".join(_gpu(f"0000:1{i}:00.0", i, '<nvlink target="0000:a1:00.0" count="18" '
                             'tclass="0x068000"/>') for i in range(2))
                + "".join(_nic(f"0000:2{i}:00.0") for i in range(2)))
    m = tp.register_server(tp.from_nccl_xml(_write(tmp_path, body), name="doc_nccl_pair"), overwrite=True)
    for g in (tp.fat_tree(4, server="doc_nccl_pair"), tp.leaf_spine(2, 2, 4, server=m),
              tp.torus((2, 2), server=m), tp.dragonfly(1, 2, 1, server=m)):
        tp.validate(g)
        assert len(tp.gpus(g)) % 2 == 0 and g.graph["params"]["server"]["source"].endswith("topo.xml")


def test_the_docs_block_runs_as_written(monkeypatch, capsys):
    _shared(OCI)
    root = Path(__file__).resolve().parents[2]
    page = root / "docs" / "guide" / "traces.md"
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S) if "from_nccl_xml" in b]
    monkeypatch.chdir(root)
    # the page reads "a dump of your own machine"; its outputs are those of the OCI dump here
    exec(compile(block.replace('"topo.xml"', repr(str(OCI))), "docs NCCL block", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    expected = [line.split("# ", 1)[1] for line in block.splitlines()
                if "# " in line and "NCCL_TOPO_DUMP_FILE" not in line]      # the printed lines, not the note
    assert out[0] == expected[0]
    # the printed collective line: its busbw is nccl-tests' 2(p-1)/p x S / t of the printed time
    algorithm, ms, busbw = re.match(r"(\w+): ([\d.]+) ms, busbw (\d+) GB/s", out[1]).groups()
    assert out[1] == expected[1]
    assert float(busbw) == pytest.approx(2 * 31 / 32 * 2**30 / (float(ms) * 1e-3) / 1e9, abs=1)


def test_gpus_follow_nccl_ranks_and_a_nic_without_pci_hangs_off_its_cpu(tmp_path):
    body = ('<cpu numaid="0" vendor="GenuineIntel">'
            + _pci("0000:01:00.0", "0x060400", _gpu("0000:02:00.0", 1) + _gpu("0000:05:00.0", 0))
            + '<nic><net name="mlx5_0" dev="0" speed="200000" port="1"/></nic></cpu>')
    m = tp.from_nccl_xml(_write(tmp_path, body), nvlink="none")
    g = tp.rail_optimized(1, server=m)
    assert [g.nodes[n]["busid"] for n in tp.gpus(g)] == ["0000:05:00.0", "0000:02:00.0"]
    assert g.has_edge("s0/nic0", "s0/cpu0") and "no PCI link" in m.description
    assert tp.get_link(m.nic).name == "roce_200g" and m.nics == 1


# -- bad attributes: one clear error naming the file, the element and the attribute ---------
from ..reader_checks import raises_clearly  # noqa: E402

_NIC_BUS = "0000:03:00.0"


def _nic_box(tmp_path, speed):
    return _write(tmp_path, _box(_gpu("0000:02:00.0", 0) + _nic(_NIC_BUS, speed)))


@pytest.mark.parametrize("speed", ["-400000", "-2", "nan", "NaN", "inf", "-inf", "1e400", "abc",
                                   "400000x", "9" * 400, "0x61a80"])
def test_a_bad_nic_speed_is_an_error_naming_the_port(tmp_path, speed):
    """A negative, NaN, infinite, overflowing or non-numeric <net speed> is refused (it used to
    be dropped silently, the NICs then taking the fabric's rate)."""
    path = _nic_box(tmp_path, speed)
    raises_clearly(tp.from_nccl_xml, path, "<net", 'name="mlx5_03', f'<pci busid="{_NIC_BUS}"',
                   "speed")


@pytest.mark.parametrize("speed", ["-1", "0", ""])
def test_nccls_unknown_speed_values_are_read_as_unknown(tmp_path, speed):
    """NCCL (src/graph/topo.cc, ncclTopoAddNet) reads a speed <= 0 as unknown ("Some NICs
    define speed = -1"); so does this reader: no NIC rate, the fabric's is used, and the
    description says so."""
    m = tp.from_nccl_xml(_nic_box(tmp_path, speed))
    assert m.nic is None and "no NIC speed" in m.description


def test_nic_speed_is_read_in_mb_per_s(tmp_path):
    m = tp.from_nccl_xml(_nic_box(tmp_path, "123456"))
    assert tp.get_link(m.nic).bandwidth == 123456e6 / 8


@pytest.mark.parametrize("attrs,words", [
    (dict(width="-16"), ["link_width"]),
    (dict(width="16.5"), ["link_width"]),
    (dict(width="64"), ["link_width"]),
    (dict(speed="-32.0 GT/s PCIe"), ["link_speed"]),
    (dict(speed="nan GT/s PCIe"), ["link_speed"]),
    (dict(speed="1e400 GT/s PCIe"), ["link_speed"]),
    (dict(speed="33.0 GT/s PCIe"), ["link_speed", "32"]),
    (dict(speed="32.0 Gbps"), ["link_speed"]),
])
def test_bad_pci_link_attributes_name_the_element(tmp_path, attrs, words):
    bus = "0000:05:00.0"
    body = _box(_pci(bus, "0x030200", '<gpu dev="0" sm="90" rank="0"/>', **attrs) + _nic(_NIC_BUS))
    raises_clearly(tp.from_nccl_xml, _write(tmp_path, body), f'<pci busid="{bus}"', *words)


def test_unknown_or_absent_pci_rates_are_assumed_and_noted(tmp_path):
    """Linux writes "Unknown" where it cannot tell the link speed and NCCL then assumes a rate;
    so does this reader (Gen 5 x16), and says so. A link_width of 0 is x16, as in NCCL."""
    body = _box(_pci("0000:05:00.0", "0x030200", '<gpu dev="0" sm="90" rank="0"/>', speed="Unknown",
                     width="0") + _nic(_NIC_BUS))
    m = tp.from_nccl_xml(_write(tmp_path, body))
    g = tp.rail_optimized(1, server=m)
    assert g["s0/gpu0"]["s0/pcie0"]["capacity"] == pytest.approx(PCIE5_X16)
    assert "taken as pcie5 x16" in m.description


@pytest.mark.parametrize("body,words", [
    (_box(_pci("0000:02:00.0", "0xzz", '<gpu dev="0" sm="90" rank="0"/>') + _nic(_NIC_BUS)),
     ['<pci busid="0000:02:00.0"', "class"]),
    (_box(_pci("0000:02:00.0", "0x030200", '<gpu dev="0" sm="x" rank="0"/>') + _nic(_NIC_BUS)),
     ["<gpu", '<pci busid="0000:02:00.0"', "sm"]),
    (_box(_pci("0000:02:00.0", "0x030200", '<gpu dev="0" sm="90" rank="-1"/>') + _nic(_NIC_BUS)),
     ["<gpu", "rank"]),
    (_box(_gpu("0000:02:00.0", 0, '<nvlink target="0000:a1:00.0" count="4" tclass="0xqq"/>')
          + _nic(_NIC_BUS)), ['<nvlink target="0000:a1:00.0"', "tclass"]),
    (_box(_gpu("0000:02:00.0", 0, '<nvlink target="0000:a1:00.0" count="\u00b2" tclass="0x068000"/>')
          + _nic(_NIC_BUS)), ['<nvlink target="0000:a1:00.0"', "count"]),
    (_box(_pci("0000:02:00.0", "0x030200", '<gpu dev="0" sm="90" rank="0"/>', width="x")
          + _nic(_NIC_BUS)), ['<pci busid="0000:02:00.0"', "link_width"]),
    (_box(_gpu("0000:02:00.0", 0) + _nic(_NIC_BUS) + _nic(_NIC_BUS)), [f'busid="{_NIC_BUS}"', "two"]),
    (_box(_gpu("0000:02:00.0", 0) + _gpu("0000:05:00.0", 0) + _nic(_NIC_BUS)),
     ["rank=0", '<pci busid="0000:02:00.0">', '<pci busid="0000:05:00.0">']),
])
def test_bad_attributes_name_file_element_and_attribute(tmp_path, body, words):
    raises_clearly(tp.from_nccl_xml, _write(tmp_path, body), *words)


def test_deep_nesting_is_one_line_and_the_depth_is_a_parameter(tmp_path):
    """600 PCI bridges, one inside the other: a clear error naming max_depth (it used to be a
    RecursionError traceback); with a larger max_depth the file reads."""
    inner = _gpu("0000:02:00.0", 0) + _nic(_NIC_BUS)
    for i in range(600):
        inner = _pci(f"0001:{i:04x}:00.0", "0x060400", inner)
    path = _write(tmp_path, f'<cpu numaid="0">{inner}</cpu>')
    raises_clearly(tp.from_nccl_xml, path, "max_depth=64")
    m = tp.from_nccl_xml(path, max_depth=1000)
    # the bridges between the GPU and its NIC collapse to the one switch they share
    assert (m.gpus, m.nics) == (1, 1) and tp.get_link(m.nic).name == "ib_ndr"


@pytest.mark.parametrize("text,words", [
    (b'<system version="1"><cpu numaid="0">\xff</cpu></system>', ["not a well-formed"]),
    (b'<?xml version="1.0" encoding="no-such-codec"?><system/>', ["encoding"]),
    (b'<!DOCTYPE system [<!ENTITY a "aaaaaaaaaa">]><system>&a;</system>', ["DOCTYPE"]),
    # the same in UTF-16: its bytes hold no b"<!DOCTYPE" (3.6 MB of such entities took 434 MB)
    ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE system [<!ENTITY a "aaaaaaaaaa">]><system>&a;</system>'
     .encode("utf-16"), ["DOCTYPE"]),
    (b"", ["well-formed"]),
])
def test_bytes_encodings_and_entities(tmp_path, text, words):
    path = tmp_path / "topo.xml"
    path.write_bytes(text)
    raises_clearly(tp.from_nccl_xml, path, *words)


def test_size_limits_are_keyword_arguments(tmp_path):
    path = _write(tmp_path, _box(_gpu("0000:02:00.0", 0) + _nic(_NIC_BUS)))
    size = path.stat().st_size
    assert tp.from_nccl_xml(path, max_bytes=size).gpus == 1
    raises_clearly(lambda p: tp.from_nccl_xml(p, max_bytes=size - 1), path, f"max_bytes={size - 1}")
    # <system>, <cpu>, the switch, GPU <pci> + <gpu>, NIC <pci> + <nic> + <net>: 8 elements
    assert tp.from_nccl_xml(path, max_elements=8).gpus == 1
    raises_clearly(lambda p: tp.from_nccl_xml(p, max_elements=7), path, "max_elements=7")
    with pytest.raises(ValueError, match="max_depth"):
        tp.from_nccl_xml(path, max_depth=0)
    raises_clearly(tp.from_nccl_xml, tmp_path / "absent.xml", "no such file")


def test_gpu_count_is_bounded_by_nccls_own_limit(tmp_path):
    """NCCL holds at most 640 nodes of a type (NCCL_TOPO_MAX_NODES); so does the reader by
    default (max_gpus), before pairing GPUs with NICs (time in GPUs x PCI tree size)."""
    gpus = "".join(_gpu(f"0000:{i // 256:02x}:{i % 256:02x}.0", i) for i in range(641))
    path = _write(tmp_path, _box(gpus + _nic(_NIC_BUS)))
    raises_clearly(tp.from_nccl_xml, path, "max_gpus=640")
    assert tp.from_nccl_xml(path, max_gpus=641, nvlink="none").gpus == 641


def test_an_h200_dump_reads_as_h200_by_its_pci_device(tmp_path):
    # sm 90 is every Hopper part; the PCI device id tells them apart: 10de:2335 is
    # "GH100 [H200 SXM 141GB]" (PCI ID Repository; lspci -nn on H200 servers), whose memory the
    # catalogue gives as nvidia-smi reports it, 143,771 MiB -- not an H100 SXM's 81,559 MiB
    gpus = "".join(f'<pci busid="0000:0{i}:00.0" class="0x030200" vendor="0x10de" device="0x2335" '
                   f'link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{i}" sm="90" rank="{i}" gdr="1"/></pci>'
                   for i in range(2))
    m = tp.from_nccl_xml(_write(tmp_path, _box(gpus + _nic(_NIC_BUS))), nvlink="nvlink4")
    assert m.gpu == "h200" and m.gpu_spec.memory == 143771 * 2**20
