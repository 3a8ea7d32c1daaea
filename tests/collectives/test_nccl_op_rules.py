"""NCCL's rules of which algorithm / protocol runs an op, checked against NCCL's source
(master 5067397c unless a tag is named): NVLS's arity limit (enqueue.cc:2004-2006), the
reduction op and data type (device.h ncclNvlsSupported), the NVLink latency row of GPUs joined
straight by NVLink (tuning.cc intraHw), LL128's path rule (tuning.cc:518-535)."""

import json

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
    with pytest.raises(ValueError, match="NCCL_MAX_NVLS_ARITY"):
        collective(g, "reduce_scatter", 64 << 20, ranks=list(range(48)), algorithm="nvls")
    assert collective(g, "all_gather", 64 << 20, ranks=list(range(32)), algorithm="nvls").algorithm == "nvls"


def _pci(busid, cls, inner="", speed="32.0"):
    return f'<pci busid="{busid}" class="{cls}" link_speed="{speed} GT/s PCIe" link_width="16">{inner}</pci>'


def _gpu(busid, rank, peers, sm=80, links=12):
    nv = "".join(f'<nvlink target="{p}" count="{links}" tclass="0x030200"/>' for p in peers)
    return _pci(busid, "0x030200", f'<gpu dev="{rank}" sm="{sm}" rank="{rank}" gdr="1">{nv}</gpu>')


def _nic(busid, dev, speed=200000):
    return _pci(busid, "0x020700", f'<nic><net name="mlx5_{dev}" dev="{dev}" speed="{speed}" port="1"/></nic>')


def _server(tmp_path, name, *sockets):
    cpus = "".join(f'<cpu numaid="{i}" vendor="GenuineIntel" arch="x86_64" familyid="6" modelid="143">{body}</cpu>'
                   for i, body in enumerate(sockets))
    path = tmp_path / f"{name}.xml"
    path.write_text(f'<system version="1">{cpus}</system>')
    return tp.from_nccl_xml(path)


def _hw(graph, ranks=None):
    from flowsolver.collectives._hardware import describe
    from flowsolver.collectives._layout import participants
    ranks, layout = participants(graph, "all_reduce", ranks, None)
    return describe(graph, ranks, layout)


def test_gpus_joined_straight_by_nvlink_take_nccls_nvlink_latency_row(tmp_path):
    """tuning.cc:285: intraHw = typeIntra == LINK_NVL ? NVLINK : PCI. Two A100 joined GPU to GPU
    by 12 NVLinks: the ring runs over the NVLink (PATH_NVL), so a ring LL all-reduce's NCCL
    latency is baseLat 6.6 + 2 (2 - 1) hops x hwLat[NVLINK][ring][LL] 0.6 = 7.8 us (PCI's 1.0
    would give 8.6), Simple 8.4 + 2 x 3.4 = 15.2 (PCI 19.8)."""
    a, b = "0000:02:00.0", "0000:05:00.0"
    server = _server(tmp_path, "direct", _pci("0000:01:00.0", "0x060400", _gpu(a, 0, [b]) + _gpu(b, 1, [a])
                                              + _nic("0000:03:00.0", 0)))
    g = tp.rail_optimized(1, server=server)
    assert _hw(g).intra == "nvlink"
    r = collective(g, "all_reduce", 8, algorithm="ring", protocol=["LL", "Simple"])
    assert r.estimates["ring/LL"] * 1e6 == pytest.approx(7.8 + 8 / 87.7e9 * 2 * 1e6, abs=0.05)
    from flowsolver.collectives._nccl_model import tuner_latency
    assert tuner_latency("ring", "Simple", "all_reduce", _hw(g)) * 1e6 == pytest.approx(15.2, abs=1e-9)


def _ring4(tmp_path, name, links):
    """4 A100 under one PCIe switch, NVLink pairs ``links`` (each GPU's peers)."""
    bus = [f"0000:0{i + 2}:00.0" for i in range(4)]
    gpus = "".join(_gpu(bus[i], i, [bus[j] for j in links[i]], links=6) for i in range(4))
    return _server(tmp_path, name, _pci("0000:01:00.0", "0x060400", gpus + _nic("0000:08:00.0", 0)))


def test_nccls_ring_path_class_inside_a_node(tmp_path):
    """typeIntra of the ring NCCL's search finds: NVL where NVLink closes a ring through the
    node's GPUs (4 in a ring 0-1-2-3-0, no NVLink 0-2), NVB where NVLink joins them only through
    other GPUs (a chain 0-1-2-3: the ring 0-1-3-2-0 takes 1 -> 3 and 2 -> 0 through one GPU each,
    the one intermediate GPU an NVB path may have, paths.cc), above NVB where a hop
    needs PCIe (pairs 0-1, 2-3): only NVL takes the NVLink latency row."""
    from flowsolver.collectives._nccl_paths import PATH_NVB, PATH_NVL, type_intra
    cases = {"ring": ({0: [1, 3], 1: [0, 2], 2: [1, 3], 3: [2, 0]}, PATH_NVL),
             "chain": ({0: [1], 1: [0, 2], 2: [1, 3], 3: [2]}, PATH_NVB),
             "pairs": ({0: [1], 1: [0], 2: [3], 3: [2]}, None)}
    for name, (links, want) in cases.items():
        g = tp.rail_optimized(1, server=_ring4(tmp_path, name, links))
        kind = type_intra(g, [[f"s0/gpu{i}" for i in range(4)]])
        assert kind == want if want is not None else kind > PATH_NVB, name
        assert _hw(g).intra == ("nvlink" if want == PATH_NVL else "pcie"), name


def _two_gpus(tmp_path, name, sm, nic_under):
    """2 GPUs of ``sm`` joined by NVLink, each under its own PCIe switch of one CPU, and one NIC:
    under GPU 1's switch (``nic_under="switch"``) or on the CPU's root port (``"cpu"``)."""
    a, b = "0000:02:00.0", "0000:12:00.0"
    links = 18 if sm == 90 else 12
    nic = _nic("0000:13:00.0", 0, 400000)
    sw0 = _pci("0000:01:00.0", "0x060400", _gpu(a, 0, [b], sm, links))
    sw1 = _pci("0000:11:00.0", "0x060400", _gpu(b, 1, [a], sm, links) + (nic if nic_under == "switch" else ""))
    return _server(tmp_path, name, sw0 + sw1 + (nic if nic_under == "cpu" else ""))


def test_ll128_by_default_only_over_nccls_nic_paths(tmp_path):
    """tuning.cc:518-535 (master 5067397c; v2.19-v2.30 alike but 2.27.3): NCCL's default runs
    LL128 only where typeInter <= PATH_PXB, or <= PATH_PXN on sm90 and later. A NIC on the CPU's
    root port is PHB from both GPUs (no PXN: no GPU has it under its switch): LL128 off on
    Hopper and Ampere. A NIC under GPU 1's switch: GPU 1 is PXB, GPU 0 reaches it over NVLink
    through GPU 1 (PXN, paths.cc:817-840): the ring enters at GPU 1 and leaves from GPU 0,
    typeInter PXN: LL128 on for Hopper, off for Ampere. A protocol the user names runs anyway."""
    from flowsolver.collectives._nccl_model import PATH_PHB, PATH_PXB, PATH_PXN
    for sm, nic_under, path, ll128 in ((90, "cpu", PATH_PHB, False), (80, "cpu", PATH_PHB, False),
                                       (90, "switch", PATH_PXN, True), (80, "switch", PATH_PXN, False)):
        g = tp.rail_optimized(2, server=_two_gpus(tmp_path, f"{nic_under}{sm}", sm, nic_under), link="ib_ndr")
        assert _hw(g).nic_path == path, (sm, nic_under)
        r = collective(g, "all_reduce", 4 << 20)
        assert any(k.endswith("/LL128") for k in r.estimates) is ll128, (sm, nic_under)
        if not ll128:
            assert collective(g, "all_reduce", 4 << 20, protocol="LL128").protocol == "LL128"
    # a catalogue server's NIC hangs off its GPU (the PCIe switch folded, PXB): LL128 stays
    dgx = tp.rail_optimized(2)
    assert _hw(dgx).nic_path == PATH_PXB
    assert "tree/LL128" in collective(dgx, "all_reduce", 1 << 20).estimates


def test_ll128_off_where_nvlink_bridge_pairs_meet_over_pcie(tmp_path):
    """tuning.cc:531 typeIntra <= PATH_NVB: 4 A100 in NVLink-bridge pairs 0-1 and 2-3, the pairs
    on two sockets: a ring through the 4 crosses PCIe (above NVB), so NCCL's default runs no
    LL128, on one node or across two; the PCIe latency row (typeIntra is not NVL)."""
    bus = ["0000:02:00.0", "0000:03:00.0", "0000:82:00.0", "0000:83:00.0"]
    sw0 = _pci("0000:01:00.0", "0x060400", _gpu(bus[0], 0, [bus[1]]) + _gpu(bus[1], 1, [bus[0]])
               + _nic("0000:04:00.0", 0), "16.0")
    sw1 = _pci("0000:81:00.0", "0x060400", _gpu(bus[2], 2, [bus[3]]) + _gpu(bus[3], 3, [bus[2]])
               + _nic("0000:84:00.0", 1), "16.0")
    server = _server(tmp_path, "pairs", sw0, sw1)
    for g in (tp.rail_optimized(1, server=server), tp.rail_optimized(2, server=server, link="ib_hdr")):
        hw = _hw(g)
        assert hw.pcie_only and hw.intra == "pcie"
        assert not any(k.endswith("/LL128") for k in collective(g, "all_reduce", 1 << 20).estimates)
    # one pair alone meets over its bridge (typeIntra NVL): LL128 on, NVLink's latency row
    pair = _hw(tp.rail_optimized(1, server=server), ranks=[0, 1])
    assert not pair.pcie_only and pair.intra == "nvlink"


# ncclNvlsSupported (src/include/device.h:586-601, master 5067397c; v2.19-v2.30 alike), written
# out by type: float / double reduce Sum only; half, bfloat16, 32 / 64-bit integers Sum or MinMax
# (ncclMin and ncclMax); 8-bit integers and floats nothing. ncclAvg is PreMulSum on floats,
# SumPostDiv on integers (enqueue.cc:2526-2560), ncclProd Prod: none of them
_NVLS_REDUCES = {("sum", "float"), ("sum", "double")} | {
    (op, t) for op in ("sum", "min", "max") for t in ("half", "bfloat16", "int32", "uint32", "int64", "uint64")}


def test_nvls_only_for_what_the_nvswitch_reduces():
    from flowsolver.collectives._nccl import DTYPES, REDOPS
    hw = Hardware(8, 1, "hopper", channels=16, nvls=True)
    tree = Hardware(16, 2, "hopper", channels=16, nvls=True)
    for redop in REDOPS:
        for dtype in DTYPES:
            want = (redop, dtype) in _NVLS_REDUCES
            assert enabled("nvls", "Simple", "all_reduce", hw, redop=redop, dtype=dtype) is want, (redop, dtype)
            assert enabled("nvls", "Simple", "reduce_scatter", hw, redop=redop, dtype=dtype) is want, (redop, dtype)
            assert enabled("nvls_tree", "Simple", "all_reduce", tree, redop=redop, dtype=dtype) is want
            # enqueue.cc:425-426: an all-gather reduces nothing, NVLS whatever the op and type
            assert enabled("nvls", "Simple", "all_gather", hw, redop=redop, dtype=dtype)
    # one DGX H100, 1 GiB: sum of float runs NVLS; avg, prod, max of float and sum of int8 run
    # what NCCL runs without NVLS, the ring / tree choice
    g = tp.rail_optimized(1)
    assert collective(g, "all_reduce", 1 << 30).algorithm == "nvls"
    without = collective(g, "all_reduce", 1 << 30, algorithm=["ring", "tree"])
    for kw in (dict(redop="avg"), dict(redop="prod"), dict(redop="max"), dict(dtype="int8")):
        r = collective(g, "all_reduce", 1 << 30, **kw)
        assert (r.algorithm, r.time) == (without.algorithm, without.time), kw
    assert collective(g, "all_reduce", 1 << 30, redop="max", dtype="bfloat16").algorithm == "nvls"
    with pytest.raises(ValueError, match="avg of float"):
        collective(g, "all_reduce", 1 << 30, redop="avg", algorithm="nvls")


def test_pat_reduce_scatter_runs_no_scaled_sum():
    """enqueue.cc:2010-2012: no PAT reduce-scatter for PreMulSum / SumPostDiv (avg on any type,
    a PreMulSum op): 16 one-GPU hosts, 1 MiB."""
    g = tp.fat_tree(4)
    assert collective(g, "reduce_scatter", 1 << 20).algorithm == "pat"
    for kw in (dict(redop="avg"), dict(redop="avg", dtype="int32"), dict(redop="mulsum")):
        assert collective(g, "reduce_scatter", 1 << 20, **kw).algorithm != "pat", kw
    assert collective(g, "all_gather", 1 << 20, redop="avg").algorithm == "pat"      # gathers nothing to scale
    assert collective(g, "reduce_scatter", 1 << 20, redop="max").algorithm == "pat"


def test_redop_and_dtype_are_checked_by_name():
    g = tp.rail_optimized(1)
    with pytest.raises(ValueError, match=r"redop must be one of sum, prod, max, min, avg, mulsum .*got 'mean'"):
        collective(g, "all_reduce", 1024, redop="mean")
    with pytest.raises(ValueError, match=r"dtype must be one of int8, .*bfloat16, f8e4m3, f8e5m2 .*got 'fp32'"):
        collective(g, "all_reduce", 1024, dtype="fp32")
    # older nccl-tests' names of int8 and int32
    assert collective(g, "all_reduce", 1 << 30, dtype="char").algorithm != "nvls"
    assert collective(g, "all_reduce", 1 << 30, dtype="int").algorithm == "nvls"


def _log(redop, dtype, sizes, times):
    lines = ["# nThread 1 nGpus 1 minBytes 16777216 maxBytes 268435456 step: 4(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank  {r} Group  0 Pid {100 + r} on node0 device  {r} [0x{r:02x}] NVIDIA H100 80GB HBM3"
              for r in range(8)]
    lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
              "busbw #wrong", "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)     "
              "       (us)  (GB/s)  (GB/s)"]
    for s, t in zip(sizes, times):
        a = s / t / 1e3
        lines.append(f"{s:13d} {s // 4:13d} {dtype:>9s} {redop:>7s}      -1 {t:8.1f} {a:7.2f} {a * 1.75:7.2f}      0 "
                     f"{t:8.1f} {a:7.2f} {a * 1.75:7.2f}      0")
    return "\n".join(lines + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 100", "#"]) + "\n"


def test_calibrate_and_the_log_model_take_the_logs_redop():
    """An -o avg all-reduce log on one DGX H100 whose times are the library's own prediction of
    what NCCL runs for it (no NVLS: avg on float is PreMulSum) calibrates to the library's
    NVLink efficiency (it derated NVLink to 0.594, fitting NVLS to the ring's times)."""
    from flowsolver import calibrate
    from flowsolver.collectives import nccl_tests_collective
    from flowsolver.routing import link_efficiency
    g = tp.rail_optimized(1)
    sizes = (64 << 20, 256 << 20)
    times = [collective(g, "all_reduce", s, redop="avg").time * 1e6 for s in sizes]
    assert nccl_tests_collective(g, "all_reduce", sizes[0], redop="avg").algorithm != "nvls"
    log = _log("avg", "float", sizes, times)
    # what --compare reads to time each row (flowsolver.collectives' export for the CLI)
    from flowsolver import nccl_tests
    from flowsolver.collectives import log_reduction, measured_rows
    assert log_reduction(measured_rows(nccl_tests.read(log, op="all_reduce"))) == [("avg", "float")] * 2
    cal = calibrate(g, [log], op="all_reduce")
    assert cal.efficiency.get("nvlink4", link_efficiency("nvlink4", None)) == pytest.approx(
        link_efficiency("nvlink4", None), rel=0.02)


def test_nccl_chooses_a_ring_of_fp8_last_beyond_8_ranks():
    """enqueue.cc:2015-2020 (NCCL 2.24+): a ring's cost of f8e4m3 / f8e5m2 on more than 8 ranks
    times 1024; the other algorithms' unchanged (2 x 8 H100), none at 8 ranks (one DGX H100)."""
    g = tp.rail_optimized(2)
    for size in (1 << 10, 1 << 20):
        base = collective(g, "all_reduce", size).estimates
        fp8 = collective(g, "all_reduce", size, dtype="f8e5m2").estimates
        for key, value in base.items():
            if key.startswith("nvls"):
                continue        # no NVLS reduction of an 8-bit type (ncclNvlsSupported)
            assert fp8[key] == pytest.approx(value * (1024 if key.startswith("ring/") else 1), rel=1e-12), key
    one = tp.rail_optimized(1)
    assert collective(one, "all_gather", 1 << 20, dtype="f8e4m3").estimates == \
        collective(one, "all_gather", 1 << 20).estimates


def test_compare_times_each_log_row_with_its_redop_and_the_flags_set_it(tmp_path, capsys):
    """`flowsolver collective --compare` prices an -o avg log as NCCL ran it (no NVLS: avg on
    float is PreMulSum, ncclNvlsSupported), and --redop / --dtype set a table's reduction: the
    times are the API's with the same redop / dtype."""
    from flowsolver.cli import main
    g = tp.rail_optimized(1)
    sizes = (64 << 20, 256 << 20)
    avg = [collective(g, "all_reduce", s, redop="avg").time for s in sizes]
    path = tmp_path / "avg.log"
    path.write_text(_log("avg", "float", sizes, [t * 1e6 for t in avg]))
    assert main(["collective", "--nodes", "1", "--op", "all_reduce", "--compare", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in rows] == [collective(g, "all_reduce", s, redop="avg").algorithm for s in sizes]
    assert "nvls" not in {r["algorithm"] for r in rows}
    assert [r["time_us"] for r in rows] == pytest.approx([t * 1e6 for t in avg])
    main(["collective", "--nodes", "1", "-b", "1G", "-e", "1G", "--dtype", "int8", "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["time_us"] == pytest.approx(collective(g, "all_reduce", 1 << 30, dtype="int8").time * 1e6)
    assert row["algorithm"] != "nvls"
    assert main(["collective", "--nodes", "1", "--redop", "mean"]) == 2
    assert "--redop must be one of sum" in capsys.readouterr().err


def test_a_grace_hopper_gpu_reaches_its_cpus_nic_over_c2c():
    """4 GH200 a node as NCCL dumps them (each GPU's <c2c> to its own Grace, that Grace's NIC
    beside it, NVLink between the GPUs): NCCL merges C2C and PHB into PATH_P2C (paths.cc), which
    is <= PATH_PXN, so sm90 keeps LL128 by default (tuning.cc:518-522); the same file without
    <c2c> is PHB: LL128 off."""
    import pathlib
    import tempfile
    from flowsolver.collectives._nccl_model import PATH_P2C, PATH_PHB
    buses = [f"0000:{i:02x}:00.0" for i in (0x09, 0x19, 0x29, 0x39)]
    for c2c, path, ll128 in ((True, PATH_P2C, True), (False, PATH_PHB, False)):
        body = ""
        for i, b in enumerate(buses):
            links = "".join(f'<nvlink target="{o}" count="6" tclass="0x030200"/>' for o in buses if o != b)
            inner = ('<c2c count="10" bw="45000"/>' if c2c else "") + links
            gpu = _pci(b, "0x030200", f'<gpu dev="{i}" sm="90" rank="{i}" gdr="1">{inner}</gpu>')
            nic = _pci(f"0000:{0x0a + 16 * i:02x}:00.0", "0x020000",
                       f'<nic><net name="cxi{i}" dev="{i}" speed="200000" port="1" gdr="1"/></nic>')
            body += f'<cpu numaid="{i}" arch="arm64" vendor="ARM">{gpu}{nic}</cpu>'
        xml = pathlib.Path(tempfile.mkdtemp()) / "gh200.xml"
        xml.write_text(f'<system version="1">{body}</system>')
        g = tp.rail_optimized(2, server=tp.from_nccl_xml(xml), link="ib_ndr")
        assert _hw(g).nic_path == path
        assert any(k.endswith("/LL128") for k in collective(g, "all_reduce", 4 << 20).estimates) is ll128


def test_before_nccl_2_27_a_grace_gpus_path_over_c2c_is_phb(tmp_path):
    """NCCL 2.23.4's topo.h has no C2C path type and 2.26.2's no P2C (LOC NVL NVB C2C PIX PXB PXN
    PHB ...; P2C first in v2.27.3-1): a GH200's path over C2C, then its Grace, to the NIC there is
    PHB, past PXN, so those releases' rule (tuning.cc: typeInter <= PXN on sm90) turns LL128 off
    across nodes; from 2.27 it is P2C and LL128 runs. The graph is the same in both."""
    g = _grace_node(tmp_path, "release", 4, lambda i: True)
    for release, ll128 in (("2.23.4", False), ("2.26.2", False), ("2.27.3", True), (None, True)):
        r = collective(g, "all_reduce", 4 << 20, nccl_version=release)
        assert any(k.endswith("/LL128") for k in r.estimates) is ll128, release


def test_pxn_off_leaves_a_gpu_without_its_own_nic_on_the_cpu_path(tmp_path):
    """NCCL_PXN_DISABLE=1 (pxn=False) skips paths.cc's PXN paths: GPU 0 of the two, whose NIC is
    under GPU 1's switch, reaches it through the CPU (PHB), typeInter PHB > PXN: no LL128 on
    sm90 either; with PXN on it is PXN and LL128 runs."""
    g = tp.rail_optimized(2, server=_two_gpus(tmp_path, "pxn90", 90, "switch"), link="ib_ndr")
    on = collective(g, "all_reduce", 4 << 20)
    off = collective(g, "all_reduce", 4 << 20, pxn=False)
    assert any(k.endswith("/LL128") for k in on.estimates)
    assert not any(k.endswith("/LL128") for k in off.estimates)


def _grace_node(tmp_path, name, gpus, nic_of, bridges=False):
    """``gpus`` GH200 joined by NVLink, each GPU's <c2c> to its own Grace; the Grace of GPU ``i``
    holds a NIC where ``nic_of(i)``; ``bridges``: GPU and NIC each behind a PCIe bridge."""
    buses = [f"00{i:x}9:01:00.0" for i in range(gpus)]
    body = ""
    for i, b in enumerate(buses):
        links = "".join(f'<nvlink target="{o}" count="6" tclass="0x030200"/>' for o in buses if o != b)
        gpu = _pci(b, "0x030200",
                   f'<gpu dev="{i}" sm="90" rank="{i}" gdr="1"><c2c count="10" bw="45000"/>{links}</gpu>')
        nic = _pci(f"01{i:x}0:01:00.0", "0x020000",
                   f'<nic><net name="cxi{i}" dev="{i}" speed="200000" port="1" gdr="1"/></nic>') if nic_of(i) else ""
        if bridges:
            gpu = _pci(f"00{i:x}9:00:00.0", "0x060400", gpu)
            nic = _pci(f"01{i:x}0:00:00.0", "0x060400", nic) if nic else ""
        body += f'<cpu numaid="{i}" arch="arm64" vendor="ARM">{gpu}{nic}</cpu>'
    xml = tmp_path / f"{name}.xml"
    xml.write_text(f'<system version="1">{body}</system>')
    return tp.rail_optimized(2, server=tp.from_nccl_xml(xml), link="ib_ndr")


def test_c2c_paths_through_pcie_bridges_and_pxn_over_c2c(tmp_path):
    """NCCL links a GPU's C2C straight to its CPU above any PCIe switch (topo.cc ncclTopoAddC2c)
    and a NIC under that CPU is PHB whatever switches are between (paths.cc): P2C with GPU and
    NIC behind bridges too. A GPU whose Grace has no NIC reaches a peer's over NVLink then C2C:
    PXN (pxnType P2C, NCCL_PXN_C2C=1 from 2.28), <= PXN: LL128 stays on sm90."""
    from flowsolver.collectives._nccl_model import PATH_P2C, PATH_PXN
    g = _grace_node(tmp_path, "bridged", 4, lambda i: True, bridges=True)
    assert _hw(g).nic_path == PATH_P2C
    assert any(k.endswith("/LL128") for k in collective(g, "all_reduce", 4 << 20).estimates)
    g = _grace_node(tmp_path, "one_nic", 2, lambda i: i == 0)
    assert _hw(g).nic_path == PATH_PXN
    assert any(k.endswith("/LL128") for k in collective(g, "all_reduce", 4 << 20).estimates)


def test_a_transport_environment_naming_ll128_asks_for_it():
    """A network transport whose NCCL environment sets NCCL_PROTO (GCP's TCPXO LL128 profile:
    Simple,LL128) names LL128: parseList writes 1 over the default 2, so the path rule (no NVLink
    between PCIe GPUs) does not turn it off; the pick is the one with the user's own list."""
    from dataclasses import replace
    link = replace(tp.get_link("tcpxo_200g"), name="tcpxo_200g_ll128", transport="gcp_tcpxo_ll128")
    assert tp.get_transport("gcp_tcpxo_ll128").protocols == ("LL128", "Simple")
    g = tp.rail_optimized(2, server=tp.get_server("pcie_8gpu").with_(nic=link), link=link)
    a = collective(g, "all_reduce", 1 << 20)
    b = collective(g, "all_reduce", 1 << 20, protocol=["LL128", "Simple"])
    assert (a.algorithm, a.protocol, a.time) == (b.algorithm, b.protocol, b.time) and a.protocol == "LL128"
