"""topologies.from_simai / to_simai: SimAI topology files written here in the layout of SimAI's
own generator, and round trips of our graphs."""

import warnings

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver.collectives._pipeline import PIPELINE


def _simai_file(tmp_path, gpus=16, per_server=8, asw=8, psw=2, nic="400Gbps", nvlink="2880Gbps",
                links=None, gpu_type="H100"):
    """A rail-optimised single-ToR file laid out as SimAI's gen_Topo_Template.py lays it out:
    GPUs first, then one NVSwitch per server, the ASWs (one per rail), the PSWs; every GPU
    to its NVSwitch and to the ASW of its rail, every ASW to every PSW."""
    servers = gpus // per_server
    nvs = list(range(gpus, gpus + servers))
    asws = list(range(nvs[-1] + 1, nvs[-1] + 1 + asw))
    psws = list(range(asws[-1] + 1, asws[-1] + 1 + psw))
    rows = []
    for i in range(gpus):
        rows.append(f"{i} {nvs[i // per_server]} {nvlink} 0.000025ms 0")
        rows.append(f"{i} {asws[i % per_server]} {nic} 0.0005ms 0")
    rows += [f"{a} {p} 400Gbps 0.0005ms 0" for a in asws for p in psws]
    head = f"{psws[-1] + 1} {per_server} {servers} {asw + psw} {len(rows) if links is None else links} {gpu_type}"
    path = tmp_path / "topo"
    path.write_text("\n".join([head, " ".join(map(str, nvs + asws + psws)) + " "] + rows) + "\n")
    return path


def _edges(g):
    return {(u, v): (d["capacity"], d["latency"]) for u, v, d in g.edges(data=True)}


def test_a_generator_layout_file_reads_as_its_cluster(tmp_path):
    g = tp.from_simai(_simai_file(tmp_path))
    tp.validate(g)
    kinds = [d["kind"] for _, d in g.nodes(data=True)]
    assert (kinds.count("gpu"), kinds.count("nvswitch"), kinds.count("switch"), kinds.count("nic")) == (16, 2, 10, 16)
    # 2880 Gb/s NVLink = 360 GB/s, 400 Gb/s NIC = 50 GB/s; 0.0005 ms = 500 ns
    assert g["s1/gpu3"]["nvs17"]["capacity"] == 360e9
    assert g["s1/nic3"]["sw21"]["capacity"] == 50e9 and g["s1/nic3"]["sw21"]["latency"] == pytest.approx(5e-7)
    assert g.nodes["s1/gpu3"]["rank"] == 11 and g.nodes["s1/gpu3"]["rail"] == 3
    roles = [d["role"] for _, d in g.nodes(data=True) if d["kind"] == "switch"]
    assert roles.count("leaf") == 8 and roles.count("spine") == 2
    assert g.nodes["nvs16"]["server"] == 0


def test_collectives_on_a_simai_cluster(tmp_path):
    g = tp.from_simai(_simai_file(tmp_path))
    size = 2**32
    # one server: a ring over the NVSwitch at 360 GB/s per GPU and direction
    one = fs.collective(g, "all_reduce", size, ranks=list(range(8)), algorithm="ring")
    wire = 2 * 7 / 8 * size / 360e9
    # NCCL's pipeline: 4 GiB over its 24 channels is 11 loops (10.7) of 2 x 7 chunk steps of 2 MiB,
    # plus the fill at a whole chunk's pace (11 loops x 16 MiB x 24 channels / 4 GiB = 1.03125 of
    # the mean step), plus NCCL's latency (under 100 us)
    fill = 1 + PIPELINE.fill_ring * 1.03125 / (11 * 14)
    assert wire <= one.time <= fill * wire + 100e-6
    # two servers, hierarchical rings on the rails: 8 rails of 50 GB/s
    both = fs.collective(g, "all_reduce", size, algorithm="ring")
    assert both.time >= 2 * 15 / 16 * size / (8 * 50e9)


def test_round_trip_of_a_generated_cluster(tmp_path):
    g = tp.rail_optimized(2, server="dgx_h100", link="ib_ndr")
    first = tp.to_simai(g, tmp_path / "a")
    back = tp.from_simai(first)
    assert sum(d["kind"] == "gpu" for _, d in back.nodes(data=True)) == 16
    # NVLink 4 per GPU, and the NIC's link at the slower of PCIe 5 x16 and NDR (NDR)
    assert back["s1/gpu5"][next(v for v in back.successors("s1/gpu5") if v.startswith("nvs"))]["capacity"] \
        == pytest.approx(450e9)
    nic = back["s1/nic5"]
    (leaf,) = [v for v in nic if back.nodes[v]["kind"] == "switch"]
    assert nic[leaf]["capacity"] == pytest.approx(50e9)
    # GPU -> NIC -> leaf latency: PCIe link + NDR link of the catalogue
    assert nic[leaf]["latency"] == pytest.approx(tp.get_link("pcie5").latency + tp.get_link("ib_ndr").latency)
    # leaf-spine cables keep their capacities
    spine_caps = sorted(d["capacity"] for u, v, d in g.edges(data=True) if d["tier"] == "leaf-spine")
    back_caps = sorted(d["capacity"] for u, v, d in back.edges(data=True) if d["tier"] == "fabric")
    assert back_caps == pytest.approx(spine_caps)
    # writing what was read gives the same file, and reading it the same graph
    second = tp.to_simai(back, tmp_path / "b")
    assert second.read_text() == first.read_text()
    again = tp.from_simai(second)
    assert list(again.nodes(data=True)) == list(back.nodes(data=True))
    a, b = _edges(again), _edges(back)
    assert a.keys() == b.keys()
    assert [x for k in a for x in a[k]] == pytest.approx([x for k in a for x in b[k]], rel=1e-12)


def test_round_trip_of_a_torus_of_chips(tmp_path):
    g = tp.torus((2, 3), link="ib_ndr")
    back = tp.from_simai(tp.to_simai(g, tmp_path / "t"))
    caps = sorted(d["capacity"] for _, _, d in back.edges(data=True))
    assert caps == pytest.approx(sorted(d["capacity"] for _, _, d in g.edges(data=True)))
    assert fs.collective(back, "all_gather", 2**26).time > 0


def test_nccl_server_writes_with_its_pcie_rate_and_a_warning(tmp_path):
    body = ('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" class="0x060400" '
            'link_speed="16.0 GT/s PCIe" link_width="16">'
            + "".join(f'<pci busid="0000:1{i}:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" '
                      f'link_width="16"><gpu dev="{i}" sm="90" rank="{i}"><nvlink target="0000:a1:00.0" '
                      f'count="18" tclass="0x068000"/></gpu></pci>' for i in range(2))
            + "".join(f'<pci busid="0000:2{i}:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" '
                      f'link_width="16"><nic><net name="mlx5_{i}" dev="{i}" speed="400000" port="1"/>'
                      "</nic></pci>" for i in range(2))
            + "</pci></cpu></system>")
    xml = tmp_path / "topo.xml"
    xml.write_text(body)
    g = tp.rail_optimized(2, server=tp.from_nccl_xml(xml), link="ib_ndr")
    with pytest.warns(UserWarning, match="pcie_switch"):
        back = tp.from_simai(tp.to_simai(g, tmp_path / "t"))
    # the NIC's link runs at PCIe 4.0 x16 (31.5 GB/s), slower than its 400G port
    assert back["s0/nic0"]["sw4" if back.has_edge("s0/nic0", "sw4") else next(
        v for v in back.successors("s0/nic0") if back.nodes[v]["kind"] == "switch")]["capacity"] \
        == pytest.approx(16 * 16e9 * 128 / 130 / 8)


def test_several_switch_links_per_gpu_are_one_nic_and_noted(tmp_path):
    path = tmp_path / "dual"
    path.write_text("4 2 0 2 4 A100\n2 3\n0 2 200Gbps 1us 0\n0 3 200Gbps 1us 0\n"
                    "1 2 200Gbps 1us 0\n1 3 200Gbps 1us 0\n")
    g = tp.from_simai(path)
    assert "several switches" in g.graph["notes"][0] and g.nodes["s0/gpu0"]["gpu_type"] == "a100_sxm"
    # GPU 1's NIC has a port to each switch (200 Gb/s = 25 GB/s each), the GPU side their sum
    assert g["s0/nic1"]["sw2"]["capacity"] == g["s0/nic1"]["sw3"]["capacity"] == 25e9
    assert g["s0/gpu1"]["s0/nic1"]["capacity"] == 50e9
    assert g["s0/nic1"]["sw3"]["latency"] == pytest.approx(1e-6)


@pytest.mark.parametrize("text,match", [
    ("4 2 0 1\n", "line 1: expected"),
    ("3 2 0 1 1 H100\n2\n0 2 400Gbps 1us 0\n", "announces 1 links, the file has 1|GPU has no links|no links"),
    ("3 2 0 1 2 H100\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1us 0\n0 2 400Gbps 1us 0\n", "announces 2 links"),
    ("3 2 0 1 2 H100\n2\n0 2 400Gb 1us 0\n1 2 400Gbps 1us 0\n", "line 3: rate '400Gb'"),
    ("3 2 0 1 2 H100\n2\n0 2 400Gbps 1min 0\n1 2 400Gbps 1us 0\n", "line 3: delay '1min'"),
    ("3 2 0 1 2 H100\n2\n0 7 400Gbps 1us 0\n1 2 400Gbps 1us 0\n", "line 3: link 0 -> 7"),
    ("3 2 0 1 2 H100\n9\n", "switch ids must be distinct and < node_num"),
    ("3 2 0 1 2 V100\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1us 0\n", "GPU type 'V100'"),
])
def test_bad_files(tmp_path, text, match):
    path = tmp_path / "bad"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        tp.from_simai(path)


def test_writer_refuses_what_simai_cannot_hold(tmp_path):
    g = tp.fat_tree(4)
    plain = tp.to_simai(g, tmp_path / "plain").read_text()
    tp.add_storage(g, 1, network="compute")
    assert tp.to_simai(g, tmp_path / "s").read_text() == plain      # storage is not written
    del g.nodes["storage0"]["network"]                               # a hand-made storage node
    with pytest.raises(ValueError, match="storage node"):
        tp.to_simai(g, tmp_path / "s")
    g = tp.rail_optimized(1, server="dgx_h100")
    for n in tp.gpus(g):
        g.nodes[n]["gpu_type"] = "tpu_v5"
    with pytest.raises(ValueError, match="gpu_type"):
        tp.to_simai(g, tmp_path / "t")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tp.to_simai(g, tmp_path / "t", gpu_type="H100").exists()


# -- bounds, overflow, bytes: one clear error naming the file (issue 27) ---------------------
from ..reader_checks import raises_clearly  # noqa: E402


@pytest.mark.parametrize("head,words", [
    ("1000000000 8 0 1 2 H100", ["node_num 1000000000", "max_nodes=1000000"]),
    ("3 2 0 1 99999999999 H100", ["link_num", "max_links"]),
    ("3 2 0 1 2" + "9" * 5000 + " H100", ["line 1"]),
    ("3 2 0 99999999999999999999 2 H100", ["switch_num", "node_num"]),
])
def test_announced_sizes_are_bounded_before_allocating(tmp_path, head, words):
    import tracemalloc

    path = tmp_path / "topo"
    path.write_text(f"{head}\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1us 0\n")
    tracemalloc.start()
    try:
        raises_clearly(tp.from_simai, path, *words)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


def test_more_gpus_than_the_links_can_hold_is_refused_before_allocating(tmp_path):
    """Every GPU needs a link, and a link ends at two nodes: 900 GPUs and 2 link lines is a
    truncated or wrong file, refused without building 900 nodes."""
    path = tmp_path / "topo"
    path.write_text("901 2 0 1 2 H100\n900\n0 900 400Gbps 1us 0\n1 900 400Gbps 1us 0\n")
    raises_clearly(tp.from_simai, path, "900 GPU", "2 link")


def test_limits_are_keyword_arguments(tmp_path):
    path = tmp_path / "topo"
    path.write_text("3 2 0 1 2 H100\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1us 0\n")
    assert len(tp.gpus(tp.from_simai(path, max_nodes=3, max_links=2))) == 2
    raises_clearly(lambda p: tp.from_simai(p, max_nodes=2), path, "node_num 3", "max_nodes=2")
    raises_clearly(lambda p: tp.from_simai(p, max_links=1), path, "link_num 2", "max_links=1")
    raises_clearly(lambda p: tp.from_simai(p, max_bytes=10), path, "max_bytes=10")


@pytest.mark.parametrize("rate,delay,words", [
    ("1e400Gbps", "1us", ["line 3", "rate"]),
    ("1e300Tbps", "1us", ["line 3", "rate"]),          # finite in the file, inf in bytes/s
    ("9" * 400 + "Gbps", "1us", ["line 3", "rate"]),
    ("1.2.3Gbps", "1us", ["line 3", "rate"]),
    ("400Gbps", "1e400ms", ["line 3", "delay"]),
    ("400Gbps", "-1us", ["line 3", "delay"]),
    ("400Gbps", "nanus", ["line 3", "delay"]),
    ("-400Gbps", "1us", ["line 3", "rate"]),
])
def test_overflowing_and_invalid_quantities_name_the_line(tmp_path, rate, delay, words):
    path = tmp_path / "topo"
    path.write_text(f"3 2 0 1 2 H100\n2\n0 2 {rate} {delay} 0\n1 2 400Gbps 1us 0\n")
    raises_clearly(tp.from_simai, path, *words)


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "topo"
    path.write_bytes(b"3 2 0 1 2 H100\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1\xffus 0\n")
    raises_clearly(tp.from_simai, path, "line 4", "UTF-8")
    # UTF-8, but an Arabic-Indic 3 (str.isdigit() says yes, int() reads it): not a node id
    path.write_bytes(b"3 2 0 1 2 H100\n2\n0 \xd9\xa3 400Gbps 1us 0\n1 2 400Gbps 1us 0\n")
    raises_clearly(tp.from_simai, path, "line 3")


def test_delays_are_stored_in_seconds_at_the_edge(tmp_path):
    """ns-3 Time units to seconds, once: 250 ns, 1.5 us, 0.002 ms; the GPU -> NIC hop SimAI
    does not model has none."""
    path = tmp_path / "topo"
    path.write_text("4 1 0 2 3 H100\n2 3\n0 2 400Gbps 250ns 0\n1 2 200Gbps 1.5us 0\n"
                    "2 3 100Gbps 0.002ms 0\n")
    g = tp.from_simai(path)
    assert g["s0/nic0"]["sw2"]["latency"] == pytest.approx(250e-9)
    assert g["sw2"]["s1/nic0"]["latency"] == pytest.approx(1.5e-6)
    assert g["sw2"]["sw3"]["latency"] == pytest.approx(2e-6) and g["sw3"]["sw2"]["capacity"] == 100e9 / 8
    assert g["s0/gpu0"]["s0/nic0"]["latency"] == 0.0 and g["s1/gpu0"]["s1/nic0"]["capacity"] == 200e9 / 8


def test_repeated_links_with_different_delays_keep_the_larger_and_say_so(tmp_path):
    """Two cables between the same switches are one edge of twice the rate; their delays
    differ, so the edge takes the larger (a flow split over both waits for the slower) and the
    notes say so."""
    path = tmp_path / "topo"
    path.write_text("4 1 0 2 4 H100\n2 3\n0 2 400Gbps 1us 0\n1 3 400Gbps 1us 0\n"
                    "2 3 400Gbps 1us 0\n3 2 400Gbps 3us 0\n")
    g = tp.from_simai(path)
    for a, b in (("sw2", "sw3"), ("sw3", "sw2")):
        assert g[a][b]["capacity"] == 2 * 400e9 / 8 and g[a][b]["cables"] == 2
        assert g[a][b]["latency"] == pytest.approx(3e-6)
    assert any("delay" in note and "line 6" in note for note in g.graph["notes"])


def test_failed_links_that_split_the_gpus_are_refused_not_written(tmp_path):
    # the failed links are left out of the file; where that cuts GPUs off, from_simai (and
    # SimAI) refuse what was written: the writer refuses first
    import warnings
    g = tp.fail_links(tp.fat_tree(4), 0.3, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="GPUs fall apart into disconnected parts"):
            tp.to_simai(g, tmp_path / "f.simai")
        ok = tp.to_simai(tp.fail_links(tp.rail_optimized(4), 0.05, seed=1), tmp_path / "g.simai")
    assert len(tp.gpus(tp.from_simai(ok))) == 32          # a few failures that split nothing: written
