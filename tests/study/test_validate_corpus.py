"""The validation corpus (benchmarks/validation/) and its mapping onto flowsolver
(benchmarks/validation/setups.py, run by benchmarks/validate.py): the files parse, every row's
source is described, every curve and training row has a setup or a stated reason, the printed
nccl-tests columns agree with each other (an independent check of the data), and a few
mapped clusters have the GPU, NIC and rate counts their vendor specifications give."""

import importlib
import math
import sys
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "validation"


@pytest.fixture(scope="module")
def corpus():
    read = dict(dtype=str, keep_default_na=False)
    return (pd.read_csv(CORPUS / "collectives.csv", **read), pd.read_csv(CORPUS / "training.csv", **read),
            pd.read_csv(CORPUS / "sources.csv", **read))


@pytest.fixture(scope="module")
def mods():
    for path in (ROOT / "benchmarks", CORPUS):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return importlib.import_module("setups"), importlib.import_module("validate")


def test_the_corpus_files_parse_with_their_documented_shape(corpus):
    coll, train, sources = corpus
    # the corpus README's counts: 3599 rows / 145 curves, + corpus22c's 262 / 7 (NVIDIA/nccl-tests #331 and #309:
    # 29 + 70 + 32 printed lines, each an out-of-place and an in-place row), + corpus25's 720 / 14 (boeschf's Alps
    # scaling runs, 8 curves of 30 lines; thomaslie210's A100 PCIe pair, 6 curves of 19-21 lines), + corpus26's 24 / 2
    # (ProHuper's H100 RoCE pair of nodes in NVIDIA/nccl-tests#232, Tree forced, 5 lines, and NVIDIA/nccl#1411, 7 lines),
    # + corpus27's 56 + 50 / 2 (aws-hpc-tutorials: 2 x p4de, NCCL_PROTO=simple, 28 lines; cscs-cray-network-stack: 2 x 4
    # GH200 on Santis, 25 lines)
    assert len(coll) == 3599 + 262 + 720 + 24 + 56 + 50 and coll["curve"].nunique() == 145 + 7 + 14 + 2 + 2
    assert len(train) == 421                       # 384 + InternLM's 32 (corpus21) + flash-attention's 5 (corpus22s)
    assert {"source", "curve", "op", "size_bytes", "nodes", "gpus_per_node", "time_us", "algbw_gbs", "busbw_gbs",
            "in_place", "verbatim", "url"} <= set(coll.columns)
    assert {"source", "model", "gpus", "tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "global_batch",
            "seq_len", "precision", "metric", "value"} <= set(train.columns)
    assert set(coll["op"]) <= {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast"}
    assert set(train["metric"]) <= {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu"}
    assert (coll["size_bytes"].astype(int) > 0).all() and (train["value"].astype(float) > 0).all()
    for col in ("nodes", "gpus_per_node"):
        assert (coll[col].astype(int) >= 1).all()


def test_every_row_source_is_described_and_counted(corpus):
    coll, train, sources = corpus
    known = set(sources["source"])
    assert set(coll["source"]) <= known and set(train["source"]) <= known
    counts = pd.concat([coll["source"], train["source"]]).value_counts()
    for _, s in sources.iterrows():                 # sources.csv counts its own rows right
        assert counts.get(s["source"], 0) == int(s["n_measurements"]), s["source"]


def test_algbw_is_size_over_time_on_every_row_printing_both(corpus):
    coll, _, _ = corpus
    both = coll[(coll["time_us"] != "") & (coll["algbw_gbs"] != "")]
    assert len(both) > 600
    size, t, algbw = both["size_bytes"].astype(float), both["time_us"].astype(float), both["algbw_gbs"].astype(float)
    computed = size / (t * 1e-6) / 1e9
    bad = both[(computed - algbw).abs() > 0.02 * algbw + 0.011]   # 2 digits printed: the README's tolerance
    assert bad.empty, bad[["curve", "size_bytes", "time_us", "algbw_gbs"]].to_string()


def test_every_curve_and_training_row_has_a_setup_or_a_reason(corpus, mods):
    S, _ = mods
    coll, train, _ = corpus
    for curve in coll["curve"].unique():
        assert curve in S.CURVES or S.NOT_MODELLED.get(curve), curve
    assert set(S.CURVES) | set(S.NOT_MODELLED) == set(coll["curve"])   # no stale entries
    for curve in S.EXCLUDED:
        assert S.EXCLUDED[curve] and curve in S.CURVES
    for setup in S.CURVES.values():
        assert setup.cluster in S.CLUSTERS
    for i, row in train.iterrows():
        if (row["source"], i) in S.TRAINING_NOT_MODELLED:
            continue
        cluster, kw, assumed = S.training_call(row.to_dict())
        assert cluster in S.CLUSTERS and kw["dp"] * kw.get("tp", 1) * kw.get("pp", 1) * kw.get("cp", 1) == int(row["gpus"])
        assert kw["global_batch"] % (kw["dp"] * kw["micro_batch"]) == 0, i
    for c in S.CLUSTERS.values():                   # every assumption carries its source
        assert len(c.note) > 40, c.name


def _nic_rates(g, server=0):
    """Per NIC of one server: the bytes/s its cable carries into the fabric."""
    nics = [n for n, d in g.nodes(data=True) if d["kind"] == "nic" and d.get("server") == server]
    return [sum(d["capacity"] for _, v, d in g.out_edges(n, data=True) if g.nodes[v]["kind"] == "switch")
            for n in nics]


def _gpus(g, server=0):
    return [n for n, d in g.nodes(data=True) if d["kind"] == "gpu" and d.get("server") == server]


def test_mapped_clusters_have_their_vendor_spec(mods):
    S, _ = mods
    gbit = 1e9 / 8
    # AWS p5.48xlarge: 8 H100 and 32 x 100 Gb/s EFA (3,200 Gb/s), as 8 NICs of 4 x 100 Gb/s ports
    g, ranks = S.curve_placement(S.CURVES["aws-eks-2xp5-allreduce-excerpt"], 2, 8)
    assert ranks is None and len(_gpus(g, 0)) == 8 and len(_gpus(g, 1)) == 8
    rates = _nic_rates(g)
    assert len(rates) == 8 and rates == pytest.approx([400 * gbit] * 8) and sum(rates) == pytest.approx(3200 * gbit)
    # OCI BM.GPU.H100.8: 16 x 200 Gb/s RoCE = 8 dual-port NICs
    g, _ = S.curve_placement(S.CURVES["ocit-bm.gpu.h100.8-2x8-allreduce"], 2, 8)
    assert _nic_rates(g) == pytest.approx([2 * 200 * gbit] * 8)
    # GCP A3 Mega: 8 GPU NICs of 200 Gb/s (TCPXO)
    g, _ = S.curve_placement(S.CURVES["gcp-a3mega-2x8H100-allreduce"], 2, 8)
    assert _nic_rates(g) == pytest.approx([200 * gbit] * 8)
    # CSCS Alps: 4 GH200 per node, one 200 Gb/s Slingshot NIC each
    g, ranks = S.curve_placement(S.CURVES["cscs-alps-2x4GH200-allreduce"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # CSCS Alps in a uenv (boeschf): the same node, 4 x 200 Gb/s Slingshot 11, on 128 nodes
    g, ranks = S.curve_placement(S.CURVES["cscs-alps-uenv-128x4GH200-allreduce"], 128, 4)
    assert ranks is None and len(_gpus(g)) == 4 and len(_gpus(g, 127)) == 4 and not _gpus(g, 128)
    assert _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # thomaslie210: one A100 PCIe and one 200 Gb/s HDR HCA (NCCL's NET[25.0]) a host
    g, ranks = S.curve_placement(S.CURVES["tl-2x1A100PCIe-hdr-broadcast"], 2, 1)
    assert ranks is None and len(_gpus(g)) == 1 and len(_gpus(g, 1)) == 1 and _nic_rates(g) == pytest.approx([200 * gbit])
    # OCI GB200 NVL72 over 2 racks: 32 hosts of 4 GPUs = 128 ranks, 64 in each 72-GPU domain
    g, ranks = S.curve_placement(S.CURVES["ociqs-gb200-32x4-allreduce"], 32, 4)
    assert len(_gpus(g, 0)) == 72 and len(ranks) == 128 and sum(r < 72 for r in ranks) == 64
    assert _nic_rates(g) == pytest.approx([400 * gbit] * 72)
    # NREL Kestrel: 4 H100 per GPU node and "two 200 Gb/s Network Interface Cards" (NREL system configuration)
    g, ranks = S.curve_placement(S.CURVES["nrel-kestrel-16x4H100-allreduce"], 16, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 2)
    # CoreWeave GB200: 20 full racks of 18 trays x 4 GPUs = 1440 ranks, 72 a rack, one 400 Gb/s IB NIC a GPU
    g, ranks = S.curve_placement(S.CURVES["coreweave-gb200-360x4-allreduce-20racks"], 360, 4)
    assert len(ranks) == 20 * 18 * 4 and sum(r < 72 for r in ranks) == 72
    assert _nic_rates(g) == pytest.approx([400 * gbit] * 72)
    # ABCI Compute Node (A): 8 A100 and "InfiniBand HDR (200 Gbps)" x 4 (ABCI system overview); the 1 x 4 run: GPUs 0-3
    g, ranks = S.curve_placement(S.CURVES["abci-a-16x8A100-allreduce"], 16, 8)
    assert ranks is None and len(_gpus(g)) == 8 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    assert S.curve_placement(S.CURVES["abci-a-1x4A100-allreduce"], 1, 4)[1] == [0, 1, 2, 3]
    # NRIS Olivia: 4 GH200 a node, "4 Slingshot interfaces" of 200 Gb/s (Olivia OpenMPI and overview pages)
    g, ranks = S.curve_placement(S.CURVES["nris-olivia-2x4GH200-allreduce"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # NERSC Perlmutter: 4 A100 and 4 Slingshot 11 NICs of 200 Gb/s a node (4 cxi devices in the log)
    g, ranks = S.curve_placement(S.CURVES["nersc-perlmutter-2x4A100-allreduce-nccl2.22"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # GCP A4X Max across 2 NVL72 domains: one 4-GPU instance in each, "4 CX-8 SuperNICs ... 3,200 Gbps ... 8-way
    # rail-aligned" (GCP GPU network bandwidth page): 2 x 400 Gb/s a GPU
    g, ranks = S.curve_placement(S.CURVES["gcp-a4xmax-2x4GB300-allgather-crossdomain"], 2, 4)
    assert len(ranks) == 8 and sum(r < 72 for r in ranks) == 4
    assert _nic_rates(g) == pytest.approx([2 * 400 * gbit] * 72)
    # SURF Snellius gpu_h100: 4 H100 and 4 InfiniBand ports of "Rate: 200" a node (the source's ibstat), one a GPU
    g, ranks = S.curve_placement(S.CURVES["snellius-2x4H100-allreduce"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # AWS p6-b300.48xlarge: 8 B300 and "16×EFA/节点，每张 400 Gb/s" (6.4 Tb/s a node), 2 ports a GPU
    g, ranks = S.curve_placement(S.CURVES["aws-p6b300-2x8B300-alltoall"], 2, 8)
    assert ranks is None and len(_gpus(g)) == 8 and sum(_nic_rates(g)) == pytest.approx(16 * 400 * gbit)
    assert _nic_rates(g) == pytest.approx([2 * 400 * gbit] * 8)
    # AWS p5.48xlarge again (KeitaW's EKS runs): "Selected Provider is efa (found 32 nics)" = 32 x 100 Gb/s a node
    g, ranks = S.curve_placement(S.CURVES["keitaw-p5-2x8-allreduce-nccl2.22.3"], 2, 8)
    assert ranks is None and len(_gpus(g)) == 8 and sum(_nic_rates(g)) == pytest.approx(32 * 100 * gbit)
    # MareNostrum 5 ACC: 4 H100 a node ("NV6", no NVSwitch) and 4 InfiniBand ports of 200 Gb/s (BSC's 4 x NDR200)
    g, ranks = S.curve_placement(S.CURVES["mn5-acc-4x4H100-allreduce"], 4, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    assert S.CURVES["mn5-acc-1x4H100-allreduce"].candidates == ("ring", "tree")          # no NVLS without NVSwitch
    mn5 = S.CLUSTERS["bsc_mn5_acc_h100"].server
    assert mn5.layout == "nvlink_mesh" and mn5.links_per_pair == 6                      # "NV6 interconnect"
    # NVIDIA/nccl#652: 8 A100-SXM4 and "4 IB HDR cards for a total of 100 GB/s" a node, 32 nodes
    g, ranks = S.curve_placement(S.CURVES["nccl652-32x8A100-allreduce"], 32, 8)
    assert ranks is None and len(_gpus(g)) == 8 and len(_gpus(g, 31)) == 8
    assert _nic_rates(g) == pytest.approx([200 * gbit] * 4) and sum(_nic_rates(g)) == pytest.approx(100e9)
    # Azure NDm A100 v4 (ND96amsr_A100_v4): "eight NVIDIA Ampere A100 80GB" and a dedicated HDR InfiniBand connection a
    # GPU (Azure series page; HDR = 200 Gb/s; the source's 'nvidia.com/mlnxnics: 8'), 2 VMs
    g, ranks = S.curve_placement(S.CURVES["azure-ndm_a100_v4-2x8A100-allreduce-aks"], 2, 8)
    assert ranks is None and len(_gpus(g)) == 8 and len(_gpus(g, 1)) == 8
    assert _nic_rates(g) == pytest.approx([200 * gbit] * 8) and sum(_nic_rates(g)) == pytest.approx(1600 * gbit)
    # NERSC Perlmutter again (Steven Farrell's shifter run): 4 A100 and 4 Slingshot 11 NICs of 200 Gb/s a node
    g, ranks = S.curve_placement(S.CURVES["nersc-perlmutter-2x4A100-allreduce-nccl2.21-shifter"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and _nic_rates(g) == pytest.approx([200 * gbit] * 4)
    # nccl-tests on 2 of 8 GPUs of one A4 node: ranks 0 and 1
    g, ranks = S.curve_placement(S.CURVES["dranet-gke-a4-1x2B200-allgather"], 1, 2)
    assert ranks == [0, 1] and len(_gpus(g)) == 8
    # CINECA Leonardo (NVIDIA/nccl-tests#331): 4 A100-SXM-64GB a node, "NV4" between every pair (nvidia-smi topo: no
    # NVSwitch) and 4 IB HCAs mlx5_0-3, each PXB to one GPU; the sendrecv ran on devices 0 and 1
    leo = S.CLUSTERS["leonardo_booster_a100"].server
    assert leo.gpus == 4 and leo.layout == "nvlink_mesh" and leo.links_per_pair == 4 and leo.nics == 4
    g, ranks = S.curve_placement(S.CURVES["nccltests331-leonardo-1x2A100-sendrecv"], 1, 2)
    assert ranks == [0, 1] and len(_gpus(g)) == 4
    # gj-aion's cluster in NVIDIA/nccl-tests#309: 8 H100 a node on "IB 400G", "the 400 GB/s IB limit" = 8 x 400 Gb/s a
    # node; 2, 4 and 8 nodes x 8 ranks
    for n in (2, 4, 8):
        g, ranks = S.curve_placement(S.CURVES[f"nccltests309-gjaion-{n}x8H100-allreduce"], n, 8)
        assert ranks is None and len(_gpus(g)) == 8 and len(_gpus(g, n - 1)) == 8
        assert _nic_rates(g) == pytest.approx([400 * gbit] * 8) and sum(_nic_rates(g)) == pytest.approx(400e9)
    assert S.CURVES["nccltests309-gjaion-2x8H100-allreduce-ring-minctas24"].algorithm == "ring"     # NCCL_ALGO=Ring
    # qoofyk's 4 VMs in #309: "8x CX-7 IB 400Gbps" a server, 32 ranks
    g, ranks = S.curve_placement(S.CURVES["nccltests309-4x8H100-allreduce-vmware"], 4, 8)
    assert ranks is None and len(_gpus(g, 3)) == 8 and _nic_rates(g) == pytest.approx([400 * gbit] * 8)
    # InternLM's A100 cluster: "nvidia_a100-sxm4-80gb", "4 * 100Gb RoCE" inter-machine bandwidth a node, 8 GPUs a
    # node ("zero1=8 ... within 8 GPUs in a single node"): 4 NICs of 100 Gb/s, 400 Gb/s a node; 1024 GPUs = 128 nodes
    c = S.CLUSTERS["internlm_a100_roce"]
    g = c.graph(S.servers_for("internlm_a100_roce", 1024))
    assert c.gpus_per_server == 8 and len(_gpus(g)) == 8 and len(_gpus(g, 127)) == 8
    assert _nic_rates(g) == pytest.approx([100 * gbit] * 4) and sum(_nic_rates(g)) == pytest.approx(400 * gbit)
    # ProHuper's H100 RoCE nodes (NVIDIA/nccl-tests#232, NVIDIA/nccl#1411): 4 NICs a node, PIX to GPUs 0/2/4/6, 400 Gb/s
    # each ('theoretical busbw should be 200'); #232 runs GPU0 of each of 2 nodes with Tree forced, #1411 the 4 GPUs
    # that have a NIC
    g, ranks = S.curve_placement(S.CURVES["nccltests232-2x1H100-roce-allreduce-tree"], 2, 1)
    assert ranks == [0, 4] and _nic_rates(g) == pytest.approx([400 * gbit] * 4)
    assert S.CURVES["nccltests232-2x1H100-roce-allreduce-tree"].algorithm == "tree"               # NCCL_ALGO=Tree
    g, ranks = S.curve_placement(S.CURVES["nccl1411-2x4H100-roce-allreduce-ring-crossnic0"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and len(_gpus(g, 1)) == 4
    # aws-hpc-tutorials' p4de pair: 8 A100 80GB + 4 x 100 Gb/s EFA a node ('found 4 nics'), NCCL_PROTO=simple forced
    g, ranks = S.curve_placement(S.CURVES["aws-hpcworkshop-2xp4de-allreduce-simple"], 2, 8)
    assert ranks is None and len(_gpus(g)) == 8 and _nic_rates(g) == pytest.approx([100 * gbit] * 4)
    assert S.CURVES["aws-hpcworkshop-2xp4de-allreduce-simple"].protocol == "Simple"
    assert all(c.protocol == "auto" for k, c in S.CURVES.items() if k != "aws-hpcworkshop-2xp4de-allreduce-simple")
    # CSCS's cray-network-stack container example: 2 Alps GH200 nodes (4 GPUs, 4 Slingshot NICs each, no NVSwitch)
    g, ranks = S.curve_placement(S.CURVES["cscs-santis-cxi-container-2x4GH200-allreduce"], 2, 4)
    assert ranks is None and len(_gpus(g)) == 4 and len(_gpus(g, 1)) == 4
    assert S.CURVES["cscs-santis-cxi-container-2x4GH200-allreduce"].candidates == ("ring", "tree")


def test_measured_times_come_from_the_printed_columns(mods):
    _, V = mods
    row = dict(op="all_reduce", size_bytes="1073741824", time_us="", algbw_gbs="", busbw_gbs="437.50")
    t, precision = V.measured_time(row, 8)
    assert t == pytest.approx(2**30 * 1.75 / 437.5e9) and precision == pytest.approx(0.005 / 437.5)
    t, _ = V.measured_time(dict(row, time_us="4511.2"), 8)
    assert t == pytest.approx(4511.2e-6)
    _, precision = V.measured_time(dict(row, busbw_gbs="0.04"), 8)
    assert precision > V.PRECISION_LIMIT                # too coarse: kept out of the medians
    assert [V.band(s) for s in (1024, 2**16, 2**24, 2**30)] == ["< 64 KiB", "64 KiB-16 MiB", "16 MiB-1 GiB", ">= 1 GiB"]


def test_leave_one_source_out_fits_without_the_held_out_source(mods):
    _, V = mods
    rows = [dict(kind="collective", source=s, band="b", measured=m, model=1.0)
            for s, m in (("a", 2.0), ("a", 2.0), ("b", 3.0), ("c", 5.0))]
    seen = []

    def fit(train):
        seen.append({r["source"] for r in train})
        return sum(r["measured"] for r in train) / len(train)

    out = V.loso(rows, fit, lambda test, mean: [mean] * len(test))
    assert seen == [{"b", "c"}, {"a", "c"}, {"a", "b"}]
    assert [o["source"] for o in out] == ["a", "a", "b", "c"]
    assert out[0]["predicted"] == pytest.approx(4.0) and out[0]["err"] == pytest.approx(1.0)
    assert out[3]["predicted"] == pytest.approx(7 / 3)
    ident = V.loso(rows, V.fit_nothing, V.predict_model)
    assert [o["err"] for o in ident] == pytest.approx([-0.5, -0.5, -2 / 3, -0.8])
    scaled = V.loso(rows, V.fit_band_scale, V.predict_band_scale)
    assert scaled[3]["predicted"] == pytest.approx(2.0)  # c held out: median of 2, 2, 3


def test_one_point_of_each_kind_runs_end_to_end(corpus, mods):
    _, V = mods
    coll, train, _ = corpus
    pts = V.collective_points(coll[coll["curve"] == "mle-h200-1x8-16G-all_gather-default"].to_dict("records"))
    pt = V.run_collective(pts[0])
    assert pt["status"] == "ok" and pt["model_algorithm"] == "ring" and math.isfinite(pt["err"])
    assert abs(pt["err"]) < 0.10                     # 16 GiB all-gather on 8 H200: NVLink-bound
    i = int(train.index[(train["source"] == "nvidia-dgxc-benchmarking") & (train["gpus"] == "8")][0])
    pt = V.run_training(train.loc[i].to_dict(), i)
    assert pt["status"] == "ok" and pt["model_value"] > 0 and math.isfinite(pt["err"])


def test_every_published_layout_fits_its_gpu_in_the_model(corpus, mods):
    """The runs ran: each training row's layout (on whole servers) fits the GPU's memory as
    NVML reports it in the model's estimate (states and activations, the run's recompute
    mode: MaxText's save_qkv_proj, torchtitan's per-op selective checkpointing)."""
    setups, _ = mods
    _, train, _ = corpus
    checked, over = 0, []
    for index, row in train.iterrows():
        found = setups.layout_memory(dict(row))
        if found is None:
            continue
        memory, capacity, kw = found
        checked += 1
        if memory > capacity:
            over.append((index, row["source"], row["model"], row["gpus"], kw.get("recompute"), memory / 1e9))
    assert checked == 355 and not over, over        # 318 + InternLM's 32 (corpus21) + flash-attention's 5


@pytest.mark.parametrize("model,gpu", [("mpt-3b", "a100_40gb"), ("mpt-760m", "h100_80gb")])
def test_the_plan_finds_the_published_layout_or_a_faster_one(corpus, mods, model, gpu):
    """plan, searched with the run's own fixed settings, is at least as fast in the model as
    the published layout, which lies in its search space (llm-foundry on 16 GPUs: micro-batches
    5 and 24, no activation checkpointing with flash attention)."""
    import dataclasses

    import topologies as tp
    from flowsolver import plan, training_step
    from flowsolver.planning import STEP_OPTIONS
    from flowsolver.training import step_arguments

    setups, _ = mods
    _, train, _ = corpus
    (row,) = [dict(r) for _, r in train.iterrows() if r["source"] == "llm-foundry" and r["model"] == model
              and r["gpu"] == gpu and r["gpus"] == "16" and r["metric"] == "tokens_per_s_per_gpu"][:1]
    cluster, kw, _ = setups.training_call(row)
    spec_gpu = kw.get("gpu") or tp.get_gpu(setups.CLUSTERS[cluster].server.gpu)
    kw["gpu"] = dataclasses.replace(spec_gpu, memory=setups.NVML_MEMORY.get(spec_gpu.name, spec_gpu.memory))
    g = setups.CLUSTERS[cluster].graph(setups.servers_for(cluster, 16))
    published = training_step(g, **step_arguments(**kw))
    assert published.fits
    fixed = {k: v for k, v in kw.items() if k in STEP_OPTIONS}
    rest = {k: kw[k] for k in ("model", "global_batch", "seq_len", "precision", "gpu") if k in kw}
    p = plan(g, top=1, max_solves=12, **rest, **fixed)
    assert p.best.step_time <= published.step_time * (1 + 1e-9)


def test_the_pipeline_is_fitted_on_runs_of_nccl_with_pxn_only(mods):
    """Runs of NCCL before 2.12 (no PXN, which the model's routes take) are reported, never
    fitted on: a fit with a far-off 2.8 source added is the fit without it, and its points are
    still predicted (held out) with the constants of the others."""
    pr = importlib.import_module("pipeline_records")
    assert pr.nccl_version("2.8.4-1 (the repository's table)") == (2, 8)
    assert pr.nccl_version("2.29.2") == (2, 29) and pr.nccl_version("") is None
    _, V = mods            # the report's grouping by version uses the same boundary
    assert [V.nccl_era(v) for v in ("2.9.9+cuda11.2", "2.12.12", "2.22.3", "2.23.4", "")] == \
        ["before 2.12", "2.12-2.22", "2.12-2.22", "2.23 or later", "not stated"]

    def point(source, version, size, factor):
        pipe = dict(algorithm="ring", protocol="Simple", op="all_reduce", size=float(size), ranks=16, nodes=2,
                    channels=16, latency=20e-6, algbw=100e9)
        t = pr.predict(dict(pipe=pipe, model=0.0), pr.Pipeline(floor_simple=2e-6, fill_ring=2.0)) * factor
        return pr.record(dict(source=source, curve=source, band="", measured=t, model=t, nccl_version=version), pipe)

    sizes = [2 ** k for k in range(14, 30, 2)]
    modern = [point(s, "2.26.2", n, 1.0) for s in ("a", "b") for n in sizes]
    old = [point("old", "2.8.4", n, 3.0) for n in sizes]          # three times slower: would drag a fit
    assert [r["fitted"] for r in modern + old] == [True] * len(modern) + [False] * len(old)
    assert pr.fit(modern + old) == pr.fit(modern)
    held = pr.held_out(modern + old)
    assert all(math.isfinite(t) for t in held)
    # the old source's points come out at a third of their measured times (the others' constants)
    assert [t / r["measured"] for t, r in zip(held[len(modern):], old)] == pytest.approx([1 / 3] * len(old), rel=0.05)


def test_a_captured_all_to_all_is_predicted_again_at_its_own_time(mods):
    """The held-out refit of the P2P share re-times each captured point with another share: at the
    share the point was timed with it gives the point's own time back. An all-to-all rank moves
    (ranks - 1) / ranks of its buffer through its P2P channels (2 x 1 H100: half), which the
    capture must carry, or a refit doubles a 2-rank all-to-all's time."""
    import topologies as tp

    from flowsolver import collective
    from flowsolver.collectives._p2p import P2P_CHANNEL_SHARE

    pr = importlib.import_module("pipeline_records")
    g = tp.rail_optimized(nodes=2)
    for op, size in (("all_to_all", 2.0 ** 32), ("send_recv", 2.0 ** 30)):
        with pr.P2pCapture() as seen:
            r = collective(g, op, size, ranks=[0, 8])
        assert seen.record is not None, op
        assert pr.p2p_predict(dict(p2p=seen.record), P2P_CHANNEL_SHARE) == pytest.approx(r.time, rel=1e-6), op


def test_flash_attention_rows_are_the_printed_node_throughput_per_gpu(corpus, mods):
    """flash-attention's training README prints the 8-GPU node's tokens/s ('1310k') and the batch in tokens
    ('0.5M'): each row is that figure over 8 GPUs, and its global batch x 2048 the printed batch (0.5M = 2^19,
    1M = 2^20 tokens); the configs' data-parallel layouts map to DDP (zero 0) for 125M / 355M, ZeRO-1 above."""
    S, _ = mods
    _, train, _ = corpus
    rows = train[train["source"] == "flash-attention-training-readme"]
    assert len(rows) == 5
    for _, row in rows.iterrows():
        cells = [c.strip() for c in row["verbatim"].strip("|").split("|")]
        assert float(row["value"]) == float(cells[2].rstrip("k")) * 1e3 / 8
        assert int(row["global_batch"]) * 2048 == {"0.5M": 2 ** 19, "1M": 2 ** 20}[cells[1]]
        cluster, kw, assumed = S.training_call(row.to_dict())
        assert cluster == "dgx_a100_hdr" and kw["dp"] == 8 and kw.get("tp", 1) == 1 and kw["recompute"] == "none"
        assert kw["zero"] == (0 if row["model"] in ("gpt3-125m", "gpt3-355m") else 1)
        assert kw["attention"] == "fa2" and kw["model"].gated_mlp is False and kw["model"].tied_embeddings
