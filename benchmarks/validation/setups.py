"""The validation corpus mapped onto flowsolver: which cluster and which call each curve of
``collectives.csv`` and each row of ``training.csv`` is, the way an expert who knows the
instance types would set it up with the public API and its default settings.

Three tables:

* ``CLUSTERS``: one entry per machine type (server model, NIC count and rate, fabric link),
  each assumption with the vendor specification it comes from;
* ``CURVES``: every corpus curve -> the cluster, the placement of its ranks and the algorithm
  (``"auto"`` is NCCL's choice; an algorithm is forced only where the run forced it), or a
  reason why it is not modelled / excluded;
* ``MODELS`` (published shapes of the trained models) and ``TRAINING_SOURCES`` (per source:
  cluster, framework facts), with :func:`training_call` turning one ``training.csv`` row into
  ``training_step`` keyword arguments plus the list of what was assumed or left to the
  library's defaults.

Nothing here changes the model: no efficiency, latency or overlap is fitted. Where a machine
cannot be expressed faithfully the closest model is used only when the difference does not
matter in the measured regime (and the note says why); otherwise the curve / row is listed in
``NOT_MODELLED`` with the reason.

Units: bytes, seconds, bytes/s (the catalogue's); vendor rates in Gb/s are converted by
``topologies``' link catalogue (``eth_100g`` = 100 Gb/s = 12.5e9 bytes/s per direction).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

import topologies as tp
from flowsolver import ModelSpec, get_model, memory_per_gpu
from flowsolver.collectives import TORCH_CALL_OVERHEAD
from flowsolver.training import DEFAULT_COMPUTE_EFFICIENCY
from flowsolver.training._memory import te_fp8_activations

# --- GPUs beside the servers' own ------------------------------------------------------------
# H200 SXM: the H100's GH100 die with 141 GB HBM3e on the same NVLink 4 / NVSwitch baseboard
# (HGX H200). In the graphs an H200 is the catalogue's h100_sxm server GPU (the collectives see
# the same NVLink 4 and Hopper generation); the training model gets the catalogue's "h200"
# (gpu=) for its 141 GB, its 4.8 TB/s HBM and its kernel tables.
H200 = tp.get_gpu("h200")
# Meta's Grand Teton H100: 96 GB HBM2e at 2.4 TB/s (torchtitan benchmarks), the catalogue's
# "h100_sxm_hbm2e"; the graphs keep the h100_sxm server GPU (collectives' GPU_GENERATION has
# no row for the new name, so NVLS would be lost).
H100_HBM2E = tp.get_gpu("h100_sxm_hbm2e")
# A100 40GB (MosaicML's and OCI's A100 40GB parts): 1,555 GB/s HBM2, the catalogue's "a100_40gb".
A100_40GB = tp.get_gpu("a100_40gb")


@dataclass(frozen=True)
class Cluster:
    """A machine type: ``server`` (a topologies ServerModel), the fabric ``link`` of every
    network cable, the network ``kind`` label used to group results, the ``gpu`` label
    (what the source calls it) and ``note``: every assumption with its source."""

    name: str
    server: tp.ServerModel
    link: "str | tp.LinkTech"
    kind: str
    gpu: str
    note: str
    # the GpuSpec to pass to training_step when the server's GPU type is not in the catalogue
    train_gpu: object = None

    @property
    def gpus_per_server(self) -> int:
        return self.server.gpus

    def graph(self, servers: int):
        """The cluster graph of ``servers`` servers (cached: one graph per size)."""
        return _graph(self.name, servers)

    def nic_rate(self) -> float:
        """Bytes/s one NIC sends into the fabric (ports x the port's rate)."""
        return self.server.nic_rate(self.link)


# PCIe 6.0 x16 (PCI-SIG 6.0: 64 GT/s, twice PCIe 5.0's rate per lane) between a Blackwell Ultra
# GPU and its ConnectX-8 SuperNIC (HGX B300 / GB300 NVL72: CX-8 with a built-in PCIe Gen6
# switch). Not in the catalogue: PCIe 5.0 x16 scaled x2 (LinkTech.scaled), keeping the
# catalogue's pcie5 efficiency (NCCL's 48 of 63 GB/s) -- an assumption. On PCIe 5.0 the
# 2 x 400 Gb/s (100 GB/s) per GPU of these machines would be capped at PCIe 5's 48 GB/s.
PCIE6 = tp.get_link("pcie5").scaled(2, name="pcie6_x16")


def _server(base: str, **changes) -> tp.ServerModel:
    return tp.get_server(base).with_(**changes)


# NVLinks a pair of the 4-GPU H100 / GH200 boards without NVSwitch (Snellius, Kestrel, Alps, Olivia): no
# public board description read gives it; the H100's 18 NVLink 4 over its 3 peers, which SURF Snellius'
# NCCL log agrees with (topologies/_mesh.py): an assumption, stated on each cluster.
MESH4_LINKS = 6


def _mesh4(base: str, **changes) -> tp.ServerModel:
    """``base``'s GPU on a 4-GPU NVLink mesh of MESH4_LINKS links a pair (layout "nvlink_mesh")."""
    return _server(base, gpus=4, layout="nvlink_mesh", links_per_pair=MESH4_LINKS, **changes)


CLUSTERS: dict[str, Cluster] = {}


def _add(c: Cluster) -> None:
    CLUSTERS[c.name] = c


# --- NVIDIA DGX / HGX 8-GPU servers -----------------------------------------------------
_add(Cluster("dgx_h100_ndr", tp.get_server("dgx_h100"), "ib_ndr", "InfiniBand", "H100",
             "DGX H100 (DGX H100 user guide): 8 H100 SXM, NVLink 4 / NVSwitch, 8 x ConnectX-7 400 Gb/s NDR, "
             "one per GPU; DGX SuperPOD rail-optimised fabric (NVIDIA DGX SuperPOD H100 reference architecture). "
             "The library's default cluster."))
_add(Cluster("dgx_a100_hdr", tp.get_server("dgx_a100"), "ib_hdr", "InfiniBand", "A100",
             "DGX A100 / HGX A100 8-GPU (DGX A100 user guide): 8 A100 SXM4, NVLink 3 / NVSwitch, "
             "8 x ConnectX-6 200 Gb/s HDR. Used for single-node A100 runs, where the NICs carry nothing."))
_add(Cluster("dgx_b200_ndr", tp.get_server("dgx_b200"), "ib_ndr", "InfiniBand", "B200",
             "DGX B200 / HGX B200 (DGX B200 user guide): 8 B200, NVLink 5 / NVSwitch, 8 x ConnectX-7 400 Gb/s."))

# --- Azure ND VMs (single VM runs: only the NVLink domain matters) -------------------------
_add(Cluster("azure_nd_a100_v4", tp.get_server("dgx_a100").with_(name="nd_a100_v4"), "ib_hdr", "NVLink (1 node)",
             "A100",
             "Azure ND A100 v4 (Azure docs, ND A100 v4 series): 8 A100 80GB SXM4 on NVLink 3 / NVSwitch, "
             "8 x 200 Gb/s HDR InfiniBand (unused in a single-VM run)."))
_add(Cluster("azure_nd_h100_v5", tp.get_server("dgx_h100").with_(name="nd_h100_v5"), "ib_ndr", "NVLink (1 node)",
             "H100",
             "Azure ND H100 v5 (Azure docs, ND H100 v5 series): 8 H100 SXM on NVLink 4 / NVSwitch, "
             "8 x 400 Gb/s NDR InfiniBand (unused in a single-VM run)."))
_add(Cluster("azure_nd_h200_v5", tp.get_server("dgx_h100").with_(name="nd_h200_v5"), "ib_ndr",
             "NVLink (1 node)", "H200",
             "Azure ND H200 v5 (Azure docs, ND H200 v5 series): 8 H200 on NVLink 4 / NVSwitch (the H200 "
             "datasheet's 900 GB/s NVLink, the H100's), 8 x 400 Gb/s NDR.", H200))
# ND GB200 v6 (Azure docs, ND GB200 v6 series): one VM is one GB200 compute tray, 2 Grace + 4
# Blackwell GPUs, NVLink 5 (1.8 TB/s both directions per GPU) to the rack's NVSwitch trays,
# 4 x 400 Gb/s NDR ConnectX-7. Modelled as the NVL72 server cut to its 4-GPU tray.
_add(Cluster("azure_nd_gb200_v6", tp.get_server("nvl72").with_(name="nd_gb200_v6", gpus=4, nics=4), "ib_ndr",
             "NVLink (1 node)", "GB200",
             "Azure ND GB200 v6: one GB200 tray (4 GPUs, NVLink 5 to the NVL72 switch trays, 4 x 400 Gb/s "
             "NDR) as the catalogue's nvl72 server cut to 4 GPUs."))

# --- AWS (EFA: the catalogue's efa_* links, whose transport is aws-ofi-nccl's) ---------------
# p5.48xlarge (AWS EC2 P5 page; EC2 user guide, network cards): 8 H100 SXM, 3,200 Gb/s EFA as
# 32 network cards of 100 Gb/s, 4 per GPU -> 8 NICs of 4 x 100 Gb/s EFA ports. aws-ofi-nccl
# reports 75 us of network latency to NCCL on p5 (topologies/transports.py, aws_ofi_p5).
# Its hosts are AMD (AWS P5 page: "3rd Gen AMD EPYC processors (AMD EPYC 7R13)").
_add(Cluster("aws_p5", _server("dgx_h100", name="p5.48xlarge", nic="efa_100g", nic_ports=4, cpu="amd"), "efa_100g",
             "AWS EFA",
             "H100",
             "AWS p5.48xlarge: 8 H100 + 32 x 100 Gb/s EFA (3,200 Gb/s; AWS P5 page), as 8 NICs x 4 ports of "
             "100 Gb/s EFA (transport aws_ofi_p5: 75 us reported to NCCL, 22.1 us a hop)."))
# p5en.48xlarge (AWS P5en announcement, Sept 2024): 8 H200, 3,200 Gb/s EFAv3 as 16 x 200 Gb/s;
# aws-ofi-nccl reports 35 us (aws_ofi_p5en).
_add(Cluster("aws_p5en", _server("dgx_h100", name="p5en.48xlarge", nic="efa_200g", nic_ports=2),
             "efa_200g", "AWS EFA", "H200",
             "AWS p5en.48xlarge: 8 H200 + 16 x 200 Gb/s EFAv3 (3,200 Gb/s; AWS P5en page), as 8 NICs x 2 "
             "ports of 200 Gb/s EFA (transport aws_ofi_p5en: 35 us).", H200))
# p6-b200.48xlarge (AWS P6 page): 8 B200, 8 x 400 Gb/s EFAv4 (3,200 Gb/s), NVLink 5; 35 us.
_add(Cluster("aws_p6_b200", _server("dgx_b200", name="p6-b200.48xlarge", nic="efa_400g"), "efa_400g", "AWS EFA",
             "B200",
             "AWS p6-b200.48xlarge: 8 B200 + 8 x 400 Gb/s EFAv4 (3,200 Gb/s; AWS P6-B200 page) as 400 Gb/s "
             "EFA NICs (transport aws_ofi_p5en: 35 us)."))

# --- Google Cloud -------------------------------------------------------------------------
# a3-megagpu-8g (GCP "GPU machine types", A3 Mega): 8 H100 80GB, 8 GPU NICs of 200 Gb/s with
# GPUDirect-TCPXO (TCP, no RDMA) plus one host NIC -> 8 x 200 Gb/s tcpxo_200g, whose transport is
# GCP's Simple profile (NCCL_PROTO=Simple, NVLS off; topologies/transports.py gcp_tcpxo).
_add(Cluster("gcp_a3_mega", _server("dgx_h100", name="a3-megagpu-8g", nic="tcpxo_200g"), "tcpxo_200g", "GCP TCPXO",
             "H100",
             "GCP A3 Mega (a3-megagpu-8g; GCP GPU machine types): 8 H100 + 8 x 200 Gb/s GPU NICs, "
             "GPUDirect-TCPXO with GCP's Simple profile (Simple only, NVLS off)."))
# The same machine run with GCP's LL128 profile (NCCL_PROTO=Simple,LL128; NVLS on):
# transport gcp_tcpxo_ll128 on the same 200 Gb/s NIC.
TCPXO_LL128 = replace(tp.get_link("tcpxo_200g"), name="tcpxo_200g_ll128", transport="gcp_tcpxo_ll128")
_add(Cluster("gcp_a3_mega_ll128", _server("dgx_h100", name="a3-megagpu-8g", nic=TCPXO_LL128), TCPXO_LL128,
             "GCP TCPXO", "H100",
             "GCP A3 Mega as gcp_a3_mega, run with GCP's LL128 profile (nccl-env-profile-ll128.sh: Simple and "
             "LL128)."))
# a3-ultragpu-8g (GCP GPU machine types, A3 Ultra): 8 H200 141GB, 8 x 400 Gb/s ConnectX-7 RoCE
# (3,200 Gb/s, GPUDirect RDMA, rail-aligned), plus 2 x 200 Gb/s gVNIC host NICs.
_add(Cluster("gcp_a3_ultra", _server("dgx_h100", name="a3-ultragpu-8g", nic="roce_400g"), "roce_400g",
             "GCP RDMA", "H200",
             "GCP A3 Ultra (a3-ultragpu-8g): 8 H200 + 8 x 400 Gb/s CX-7 RoCE (3,200 Gb/s; GCP GPU machine "
             "types).", H200))
# a4-highgpu-8g (GCP GPU machine types, A4): 8 B200, 8 x 400 Gb/s ConnectX-7 RoCE (3,200 Gb/s).
_add(Cluster("gcp_a4", _server("dgx_b200", name="a4-highgpu-8g", nic="roce_400g"), "roce_400g", "GCP RDMA", "B200",
             "GCP A4 (a4-highgpu-8g): 8 B200 + 8 x 400 Gb/s CX-7 RoCE (3,200 Gb/s; GCP GPU machine types)."))

# --- Oracle Cloud (RoCE v2 cluster networks) -------------------------------------------------
# BM.GPU.H100.8 (OCI compute shapes): 8 H100, cluster network 8 x 2 x 200 Gb/s RoCE (3,200 Gb/s;
# ConnectX-7 dual port); the corpus run lists 16 HCAs; shared/data/nccl-topo's OCI dump shows
# 8 NICs x 2 ports.
_add(Cluster("oci_bm_gpu_h100_8", _server("dgx_h100", name="BM.GPU.H100.8", nic="roce_200g", nic_ports=2),
             "roce_200g", "RoCE (OCI)", "H100",
             "OCI BM.GPU.H100.8: 8 H100 + 16 x 200 Gb/s RoCE (8 dual-port CX-7, 3.2 Tb/s; OCI shape table; "
             "the run's NCCL_IB_HCA lists 16)."))
# BM.GPU4.8 (OCI compute shapes): 8 A100 40GB SXM4, cluster network 8 x 2 x 100 Gb/s RoCE
# (1.6 Tb/s). The catalogue has no roce_100g; eth_100g has the rate and no efficiency figure,
# as roce_* (the collectives see the same bytes/s).
_add(Cluster("oci_bm_gpu4_8", _server("dgx_a100", name="BM.GPU4.8", nic="eth_100g", nic_ports=2), "eth_100g",
             "RoCE (OCI)", "A100",
             "OCI BM.GPU4.8: 8 A100 40GB + 16 x 100 Gb/s RoCE (8 x 2 ports, 1.6 Tb/s; OCI shape table) as "
             "100 Gb/s Ethernet ports (no roce_100g in the catalogue; same rate)."))
# BM.GPU.B300.8 (OCI shape table, per the corpus note): 8 B300 on NVLink 5, 8 x 2 x 400 Gb/s RoCE
# (6.4 Tb/s). B300 (Blackwell Ultra) keeps NVLink 5; for collectives only NCCL's generation
# (Blackwell) and the link rates matter, so the B200 server model is used.
_add(Cluster("oci_bm_gpu_b300_8", _server("dgx_b200", name="BM.GPU.B300.8", nic="roce_400g", nic_ports=2,
                     host_link=PCIE6),
             "roce_400g", "RoCE (OCI)", "B300",
             "OCI BM.GPU.B300.8: 8 B300 (as B200: NVLink 5, Blackwell) + 8 x 2 x 400 Gb/s RoCE (6.4 Tb/s) on "
             "PCIe 6 (CX-8; pcie5 x2)."))
# OCI BM.GPU.B200.8 (OCI shape table): 8 B200, 8 x 400 Gb/s RoCE (3.2 Tb/s).
_add(Cluster("oci_bm_gpu_b200_8", _server("dgx_b200", name="BM.GPU.B200.8", nic="roce_400g"), "roce_400g",
             "RoCE (OCI)", "B200",
             "OCI BM.GPU.B200.8: 8 B200 + 8 x 400 Gb/s RoCE (3.2 Tb/s; OCI shape table); the training "
             "example does not state the fabric."))
# GB200 NVL72 on OCI (BM.GPU.GB200.4 / GB200-v3.4): a host is one compute tray of 4 GPUs; the
# rack's 72 GPUs are one NVLink 5 domain (multi-node NVLink, IMEX); between racks 4 x 400 Gb/s
# RDMA per host (shape table, per the corpus note; RoCE: OCI cluster networks are RoCE v2).
# One "server" of the model is one rack (the nvl72 server: 72 GPUs, one NIC per GPU).
_add(Cluster("oci_gb200_nvl72", _server("nvl72", name="OCI GB200 NVL72", nic="roce_400g"), "roce_400g",
             "NVL72 MNNVL", "GB200",
             "OCI GB200 NVL72: a rack = one NVLink 5 domain of 72 GPUs (18 trays of 4), 4 x 400 Gb/s RoCE per "
             "4-GPU host between racks (one 400 Gb/s NIC per GPU)."))
# GB300 NVL72 on OCI (BM.GPU.GB300.4): NVLink 5 domain as GB200; 8 x 400 Gb/s RoCE per 4-GPU host
# (NCCL_IB_HCA lists 8: ConnectX-8 800 Gb/s per GPU as 2 x 400) -> 2 ports of 400 Gb/s per GPU.
# Blackwell Ultra: the GB200 GPU model (NCCL's generation and the NVLink rate are what matter).
_add(Cluster("oci_gb300_nvl72",
             _server("nvl72", name="OCI GB300 NVL72", nic="roce_400g", nic_ports=2, host_link=PCIE6),
             "roce_400g", "NVL72 MNNVL", "GB300",
             "OCI GB300 NVL72 (as GB200 NVL72: NVLink 5 domain of 72): 8 x 400 Gb/s RoCE per 4-GPU host "
             "(2 per GPU; NCCL_IB_HCA lists 8), CX-8 on PCIe 6 (pcie5 x2)."))

# --- Other clouds and centres ---------------------------------------------------------------
# Lambda 1-Click Cluster B200 (Lambda docs): 8 B200 + 8 x 400 Gb/s NDR InfiniBand per node
# (3,200 Gb/s, NVIDIA Quantum-2, rail-optimised).
_add(Cluster("lambda_1cc_b200", _server("dgx_b200", name="lambda-1cc-b200"), "ib_ndr", "InfiniBand", "B200",
             "Lambda 1-Click Cluster B200: 8 B200 + 8 x 400 Gb/s NDR InfiniBand (Quantum-2, rail-optimised; "
             "Lambda docs)."))
# Nebius H100 GPU cluster (Nebius docs): 8 H100 + 3.2 Tb/s InfiniBand per host = 8 x 400 Gb/s NDR.
_add(Cluster("nebius_h100", _server("dgx_h100", name="nebius-h100"), "ib_ndr", "InfiniBand", "H100",
             "Nebius H100 cluster: 8 H100 + 8 x 400 Gb/s NDR InfiniBand (3.2 Tb/s per host; Nebius docs)."))
# CSCS Alps GH200 node (CSCS docs, HPE Cray EX254n blade): 4 GH200, the GPUs joined all-to-all
# by NVLink 4 (no NVSwitch), one 200 Gb/s Slingshot-11 (Cassini) NIC per GH200: the library's
# "nvlink_mesh" layout, MESH4_LINKS NVLinks a pair (below). The mesh has no NVLS (no NVSwitch);
# the curves' candidates (ring / tree) say the same.
# Slingshot 11: the catalogue's slingshot_200g (200 Gb/s; transport alps_ofi_cxi: aws-ofi-nccl's
# CXI provider, no reported latency, LL128 off as the Alps container hook sets it).
# GH200's CPU is a Grace (Arm Neoverse V2; NVIDIA GH200 datasheet).
_add(Cluster("cscs_alps_gh200", _mesh4("dgx_h100", name="alps-gh200", nics=4, nic="slingshot_200g", cpu="arm"),
             "slingshot_200g",
             "Slingshot", "GH200",
             "CSCS Alps GH200 node: 4 GH200 (Hopper GPU; NVLink 4 mesh, no NVSwitch, 6 links a pair assumed) "
             "+ 4 x 200 Gb/s Slingshot-11 NICs, one per "
             "GH200 (CSCS docs), with the Alps NCCL settings (LL128 off); Alps' DragonFly is not modelled (2 nodes)."))

# CoreWeave GB200 NVL72 (gb200-4x; CoreWeave docs "GB200 NVL72-Powered Instances": deployed as full
# racks of 18 nodes; "HPC over RDMA with InfiniBand (Quantum-X)": Quantum-2 InfiniBand): a host is
# one compute tray of 4 GPUs, the rack's 72 GPUs one NVLink 5 domain (MNNVL through IMEX); between
# racks InfiniBand, 4 IB devices a tray (the example script's UCX_NET_DEVICES=ibp0:1..ibp3:1, NCCL_IB_HCA=ibp,
# coreweave/nccl-tests @bee97e7): one 400 Gb/s NDR NIC a GPU, the catalogue's nvl72 server as it is.
# The rate (NDR 400 Gb/s, ConnectX-7) is the GB200 NVL72 reference design's, inferred: not printed.
_add(Cluster("coreweave_gb200_nvl72", _server("nvl72", name="CoreWeave GB200 NVL72"), "ib_ndr",
             "NVL72 MNNVL", "GB200",
             "CoreWeave GB200 NVL72 (gb200-4x): a rack = one NVLink 5 domain of 72 GPUs (18 trays of 4); 4 IB "
             "devices a tray (the example script), taken as 400 Gb/s NDR (reference design; rate not stated)."))
# NREL Kestrel GPU node (NREL "Kestrel System Configuration": 4 NVIDIA H100 SXM 80 GB, dual AMD Genoa,
# HPE Slingshot 11 dragonfly, "each node will have two 200 Gb/s Network Interface Cards"). The 4 H100
# SXM of an HGX 4-GPU board are joined all-to-all by NVLink 4 (no NVSwitch): the "nvlink_mesh" layout,
# MESH4_LINKS a pair, as the Alps node (no NVLS); the corpus run is 16 nodes, NIC-bound (2 x 25 GB/s
# for 4 GPUs). The Kestrel run sets no NCCL_PROTO (its
# run_nccl_cxi.sh), unlike the Alps hook's ^LL128: the Slingshot link with the catalogue's ofi_cxi
# transport (aws-ofi-nccl v1.6.0 off AWS reports latency 0, nccl_ofi_param.h; all protocols on; libfabric
# CXI's rendezvous above its default thresholds, FI_CXI_RDZV_* unset in the run), a copy of the
# catalogue's slingshot_200g. Dragonfly groups are not modelled (rail-optimised graph).
SLINGSHOT_ALL_PROTOCOLS = replace(tp.get_link("slingshot_200g"), name="slingshot_200g_allproto",
                                  transport="ofi_cxi")
# The same with HPE's NCCL environment (ccl_env.sh: FI_CXI_RDZV_THRESHOLD=0 FI_CXI_RDZV_GET_MIN=0
# FI_CXI_RDZV_EAGER_SIZE=0, NRIS' NCCL module, hpc_machines/olivia/nccl.md): every message by rendezvous.
SLINGSHOT_HPE_ENV = replace(tp.get_link("slingshot_200g"), name="slingshot_200g_hpe_env",
                            transport="ofi_cxi_rdzv_all")
# Kestrel's GPU nodes have "Dual socket AMD Genoa 64-core processors" (NREL, Kestrel system configuration).
_add(Cluster("nrel_kestrel_h100", _mesh4("dgx_h100", name="kestrel-h100", nics=2, nic=SLINGSHOT_ALL_PROTOCOLS,
                                         cpu="amd"),
             SLINGSHOT_ALL_PROTOCOLS, "Slingshot", "H100",
             "NREL Kestrel GPU node: 4 H100 SXM (NVLink 4 mesh, no NVSwitch, 6 links a pair assumed) + "
             "2 x 200 Gb/s Slingshot-11 NICs (NREL system configuration page); no NCCL_PROTO set: all protocols, "
             "no reported network latency."))

# ALCF Polaris node (ALCF user guide, docs/polaris/hardware-overview/machine-overview.md: HPE Apollo 6500
# Gen10+, four A100 "connected via NVLink" -- NV4 between every pair in its device-affinity table, no NVSwitch --
# and "a pair of slingshot network adapters", upgraded to Slingshot 11 (200 Gb/s; the alcf-nccl-tests README
# compares its runs with the Slingshot 10 ones). The A100 40GB parts (160 GiB a node). The catalogue's
# polaris_a100 server: the NVLink 3 mesh of 4 links a pair, 2 NICs on the CPU's root ports (the affinity table's
# PHB / SYS: NCCL's typeInter PHB, so no LL128 across nodes and no PXN); the multi-node runs are NIC-bound
# (2 x 25 GB/s for 4 GPUs). aws-ofi-nccl over libfabric CXI, no NCCL_PROTO set: Kestrel's
# all-protocol Slingshot link. If the Slingshot 11 NICs sit as the guide's affinity table (of the Slingshot 10
# NICs) shows, NCCL_NET_GDR_LEVEL=PHB leaves GPUs 0 and 2 (SYS to both NICs) without GPUDirect RDMA: not modelled. Dragonfly groups are not modelled.
_add(Cluster("alcf_polaris_a100", _server("polaris_a100", name="polaris-a100", nic=SLINGSHOT_ALL_PROTOCOLS),
             SLINGSHOT_ALL_PROTOCOLS, "Slingshot", "A100",
             "ALCF Polaris node: 4 A100-SXM4-40GB (NVLink 3 mesh, NV4 a pair, no NVSwitch) "
             "+ 2 x 200 Gb/s Slingshot-11 NICs (ALCF Polaris machine overview; the repository "
             "README); aws-ofi-nccl + CXI, no NCCL_PROTO set: all protocols, no reported network latency."))

# NRIS Olivia GPU node (Sigma2 documentation, UNINETTSigma2/documentation at e034799: hpc_machines/olivia.md "GPUs
# per node | 4", "NVIDIA GraceHopper Superchip (NVIDIA GH200 120GiB)", "HPE Slingshot Interconnect";
# hpc_machines/olivia/overview.md "HPE Slingshot, a Dragonfly topology that supports 200 Gbit/s simplex bandwidth";
# hpc_machines/olivia/openmpi.md "On the GPU nodes there are 4 Slingshot interfaces"):
# the HPE Cray EX GH200 node of CSCS Alps, 4 GH200 on an NVLink 4 mesh (as Alps': "nvlink_mesh", MESH4_LINKS a pair,
# no NVLS) with one 200 Gb/s Slingshot 11 NIC a GPU. The NRIS NCCL
# modules set HPE's ccl_env.sh (hpc_machines/olivia/nccl.md) and no NCCL_PROTO -- the page discusses LL128 as in
# use -- unlike the Alps hook's ^LL128: Kestrel's all-protocol Slingshot link (aws-ofi-nccl off AWS reports no
# network latency). Grace hosts (Arm Neoverse V2).
_add(Cluster("nris_olivia_gh200", _mesh4("dgx_h100", name="olivia-gh200", nics=4, nic=SLINGSHOT_HPE_ENV,
                                         cpu="arm"),
             SLINGSHOT_HPE_ENV, "Slingshot", "GH200",
             "NRIS Olivia GPU node: 4 GH200 (NVLink 4 mesh, no NVSwitch, 6 links a pair assumed) + 4 Slingshot 11 "
             "interfaces of 200 Gb/s (Olivia overview and OpenMPI pages), HPE's NCCL environment, no NCCL_PROTO: all "
             "protocols, no reported network latency; dragonfly not modelled (2 nodes)."))

# NERSC Perlmutter GPU node: "1 EPYC7763, 4 A100 GPUs, and 4 Slingshot 11 connections per node" (D. M. Rogers,
# ORNL, gist.github.com/frobnitzem/0bd3be6084115d7d58d30e6753abb251, 2023; NERSC's own architecture page,
# docs.nersc.gov, is not on GitHub and was not read here). The log shows 4 A100-SXM4-40GB a node, NVLink P2P between
# them (P2P/CUMEM) and 4 cxi devices, each GPU sending through its own with GDRDMA. Slingshot 11: 200 Gb/s a NIC.
# The 4 A100 have no NVSwitch (HPE Cray EX235n, NVLink 3 between the GPUs; the pair count is not read here): taken
# as Polaris' HGX A100 4-GPU mesh (polaris_a100: 4 NVLink 3 a pair, the A100's 12 over its 3 peers) with 4 NICs;
# the 2-node runs are NIC-bound. aws-ofi-nccl
# 1.6.0 (the log) over libfabric cxi, no NCCL_PROTO set (the repository's run_tests.sh): Kestrel's all-protocol
# Slingshot link. Each GPU's NIC next to it (nics_on="gpu", not Polaris' NICs on the CPU): GDRDMA at NCCL's
# default NCCL_NET_GDR_LEVEL (PXB) needs a path through PCIe switches only.
_add(Cluster("nersc_perlmutter_a100", _server("polaris_a100", name="perlmutter-a100", nics=4, nics_on="gpu",
                                              nic=SLINGSHOT_ALL_PROTOCOLS),
             SLINGSHOT_ALL_PROTOCOLS, "Slingshot", "A100",
             "NERSC Perlmutter GPU node: 4 A100-SXM4-40GB (NVLink 3 mesh, no NVSwitch, 4 links a pair as Polaris') "
             "+ 4 Slingshot 11 NICs of 200 Gb/s, one a GPU (ORNL's note on Perlmutter; 4 cxi devices in the log), "
             "aws-ofi-nccl 1.6.0, no NCCL_PROTO: all protocols, no reported network latency.", A100_40GB))

# GCP A4X Max (Google Cloud "Networking and GPU machines", docs.cloud.google.com/compute/docs/gpus/gpu-network-bandwidth:
# "4 NVIDIA ConnectX-8 (CX-8) SuperNICs that provide 3,200 Gbps bandwidth in an 8-way rail-aligned topology", GPUDirect
# RDMA through MRDMA, i.e. RoCE; the A4X Max series page: a4x-maxgpu-4g-metal, 4 GB300 a bare-metal instance, 18
# instances and 72 GPUs an NVL72 domain): OCI GB300's layout -- one CX-8 of 2 x 400 Gb/s a GPU (8 rails a tray) on
# PCIe 6 -- on GCP's RoCE (the catalogue's roce_400g, as gcp_a4's). One "server" is one NVL72 rack (domain).
_add(Cluster("gcp_a4x_max", _server("nvl72", name="GCP A4X Max NVL72", nic="roce_400g", nic_ports=2, host_link=PCIE6),
             "roce_400g", "NVL72 MNNVL", "GB300",
             "GCP A4X Max: NVL72 domains of 18 a4x-maxgpu-4g-metal instances (4 GB300 each); 4 CX-8 SuperNICs a "
             "instance, 3,200 Gb/s in 8 rails = 2 x 400 Gb/s RoCE a GPU (GCP GPU network bandwidth page), PCIe 6."))

# OCI H200 (argonne-lcf/oci-howto): BM.GPU.H200.8 under the oci-hpc stack. The notes show 8 H200 a node
# (nccl-tests device list), the cluster network "RDMA over RoCEv2" (0_deploying_cluster.md) and 8 RDMA
# interfaces rdma0..rdma7 a node, one port each (ibdev2netdev, 2_oci_compute_infrastructure.md). The
# rate is not printed: 400 Gb/s a port from the OCI shape table for BM.GPU.H200.8 (3,200 Gb/s cluster
# network, 8 x 400 Gb/s ConnectX-7), an assumption. HGX H200 baseboard: NVLink 4 / NVSwitch, the DGX H100's.
_add(Cluster("oci_bm_gpu_h200_8", _server("dgx_h100", name="BM.GPU.H200.8", nic="roce_400g"), "roce_400g",
             "RoCE (OCI)", "H200",
             "OCI BM.GPU.H200.8: 8 H200 (NVLink 4 / NVSwitch) + 8 RDMA ports (ibdev2netdev in the source), RoCEv2 "
             "cluster network; 400 Gb/s a port from the OCI shape table (3.2 Tb/s), not printed in the source.", H200))
# Nebius H200 (Run:ai cookbook, runai/README.md): 8 H200 a worker over Nebius' InfiniBand (the job's
# NCCL_IB_HCA=mlx5); the rate is not printed: Nebius' H200 GPU clusters are 3.2 Tb/s InfiniBand a host
# (Nebius docs, as for nebius_h100) = 8 x 400 Gb/s NDR, one a GPU, an assumption.
_add(Cluster("nebius_h200", _server("dgx_h100", name="nebius-h200"), "ib_ndr", "InfiniBand", "H200",
             "Nebius H200 cluster: 8 H200 (NVLink 4 / NVSwitch) + 8 x 400 Gb/s NDR InfiniBand (3.2 Tb/s a host, Nebius "
             "docs; the source prints neither count nor rate, only NCCL_IB_HCA=mlx5).", H200))

# AWS p4d.24xlarge (AWS EC2 P4 instance page: 8 A100 40GB SXM4 on NVSwitch, 400 Gb/s EFA as 4 network
# cards of 100 Gb/s; the DLAMI guide's check expects "Selected Provider is efa (found 4 nics)" on p4d.24xlarge).
# The run's rank list puts two GPUs on each PCIe bus ([0x10] x 2, [0x20] x 2, ...), one EFA NIC each: the
# DGX A100 server with 4 NICs of 100 Gb/s EFA, one shared by each GPU pair. aws-ofi-nccl reports 75 us of
# network latency on p4d (topologies/transports.py, aws_ofi_p4d: first-generation EFA, efa1_100g).
# p4d's hosts are Intel ("2nd Generation Intel Xeon Scalable processors", AWS P4 page), not the DGX A100's AMD.
_add(Cluster("aws_p4d", _server("dgx_a100", name="p4d.24xlarge", nics=4, nic="efa1_100g", cpu="intel"), "efa1_100g",
             "AWS EFA",
             "A100",
             "AWS p4d.24xlarge: 8 A100 40GB (NVLink 3 / NVSwitch) + 4 x 100 Gb/s EFA (400 Gb/s; AWS P4 page; 4 NICs "
             "in the DLAMI guide's check), one NIC a GPU pair (transport aws_ofi_p4d: 75 us).", A100_40GB))
# AWS p4de.24xlarge (AWS EC2 P4 instance page: as p4d.24xlarge, 8 A100 80GB SXM4 on NVSwitch and 400 Gb/s EFA as 4
# network cards of 100 Gb/s). The aws-hpc-tutorials run prints 8 A100-SXM4-80GB a host, two a PCIe bus ([0x10] x 2,
# [0x20] x 2, ...), and expects "Selected Provider is efa (found 4 nics)": the p4d server with 80 GB GPUs (the
# collectives see the same NVLink 3 / NVSwitch and the same first-generation EFA, transport aws_ofi_p4d).
_add(Cluster("aws_p4de", _server("dgx_a100", name="p4de.24xlarge", nics=4, nic="efa1_100g", cpu="intel"), "efa1_100g",
             "AWS EFA",
             "A100",
             "AWS p4de.24xlarge: 8 A100 80GB (NVLink 3 / NVSwitch) + 4 x 100 Gb/s EFA (400 Gb/s; AWS P4 page; 4 NICs "
             "in the run's log line), one NIC a GPU pair (transport aws_ofi_p4d: 75 us)."))
# ABCI 2.0 Compute Node (A) (AIST; ABCI system overview, aistabci/abci-docs en/docs/system-overview.md at
# 95081db: FUJITSU PRIMERGY GX2570 successor, "NVIDIA A100 for NVLink 40GiB HBM2" x 8, "InfiniBand HDR (200 Gbps)"
# x 4, "compute nodes(A) are equipped with 4 ports of InfiniBand HDR"): the DGX A100 server (NVLink 3 / NVSwitch)
# with 4 NICs of 200 Gb/s HDR, one shared by each GPU pair (as p4d's 4 NICs), NCCL's own IB transport. The
# benchmark's inter_anode/nccl.sh (@992278a) sets NCCL_IB_CUDA_SUPPORT=1, which NCCL 2.8.4 never reads (no
# match in v2.8.4-1's source; res21d), so GPUDirect RDMA rests on NCCL's default level (PXB, paths.cc) and the
# nv_peer_mem module, which no source says was loaded: taken as GPUDirect, the model's default (the 2-16 node
# runs reach a third of 4 x HDR at 4-32 MiB, which a host-staged path would explain; not modelled). ABCI's fat tree is not modelled (rail-optimised graph).
# Its hosts: "two Intel Xeon Platinum 8360Y Processors" (the same overview, Compute Node (A)).
_add(Cluster("abci_a_node", _server("dgx_a100", name="abci-compute-node-a", nics=4, cpu="intel"), "ib_hdr",
             "InfiniBand", "A100",
             "ABCI 2.0 Compute Node (A): 8 A100 40GB SXM4 (NVLink 3 / NVSwitch) + 4 x InfiniBand HDR 200 Gb/s, one a "
             "GPU pair (ABCI system overview); fat tree not modelled.", A100_40GB))
# SURF Snellius gpu_h100 node, as the odissei-benchmarks/nccl-tests logs (runs/, 6df4cb5) show it: 4 GPUs printed
# "NVIDIA H100" joined by NVLink (P2P/CUMEM) with "NVLS multicast support is not available" (no NVSwitch: an
# NVLink mesh), 4 InfiniBand ports of 200 Gb/s a node (ibstat "Rate: 200", runs/2nodes/ib_speed.txt) and a 25 Gb/s
# RoCE port the rings do not use; each GPU's rings leave the node by its own port (NET/IB/1-4, GDRDMA). The mesh:
# "nvlink_mesh", MESH4_LINKS a pair (the log's 24 ring channels and 16 P2P channels a peer agree, topologies._mesh); the
# 200 Gb/s ports as the catalogue's ib_hdr (200 Gb/s InfiniBand: the log prints the rate, not the generation). The
# host CPU is not stated in the source (the server model's default).
_add(Cluster("snellius_h100", _mesh4("dgx_h100", name="snellius-h100", nics=4, nic="ib_hdr"), "ib_hdr",
             "InfiniBand", "H100",
             "SURF Snellius gpu_h100 node: 4 H100 on an NVLink 4 mesh without NVSwitch (no NVLS in the log; 6 links "
             "a pair assumed) + 4 InfiniBand ports of 200 Gb/s, one a GPU (ibstat and NCCL's NET/IB "
             "lines in odissei-benchmarks/nccl-tests); IB generation not printed: ib_hdr's 200 Gb/s."))
# AWS p6-b300.48xlarge (terrificdm/p6b300-efa-deepep-nccl-testkit examples/report-sample.md, 0ec5d15: "8×B300 +
# 16×EFA/节点，每张 400 Gb/s", 6.4 Tb/s a node; its INFO run "found 16 nics"): 2 EFA ports of 400 Gb/s a GPU, the
# layout of OCI's B300 (the B200 server model: NVLink 5, Blackwell; oci_bm_gpu_b300_8). The NICs are put on PCIe 6
# (PCIE6): the report's alltoall moves 766 GB/s a node across the network, 96 GB/s a GPU, twice PCIe 5's 48 GB/s.
# EFA: the catalogue's efa_400g (aws-ofi-nccl, 35 us reported), as p6-b200. The run uses aws-ofi-nccl's tuner
# (NCCL_TUNER_PLUGIN=ofi in the image), not NCCL's, which the model copies: noted on the curves.
_add(Cluster("aws_p6_b300", _server("dgx_b200", name="p6-b300.48xlarge", nic="efa_400g", nic_ports=2, host_link=PCIE6),
             "efa_400g", "AWS EFA", "B300",
             "AWS p6-b300.48xlarge: 8 B300 (as B200: NVLink 5, Blackwell) + 16 x 400 Gb/s EFA (6.4 Tb/s; the testkit "
             "report's environment table) = 2 ports a GPU, on PCIe 6 (pcie5 x2); transport aws_ofi_p5en (35 us)."))
# Dell PowerEdge XE9680 H200 on NVIDIA Spectrum-X (sdambo-git/spc-x-host-configuration README): HGX H200
# baseboard (8 H200, NVLink 4 / NVSwitch: the DGX H100's), 8 rails eth_rail0..7 a node, each a BlueField-3
# B3140H SuperNIC "400GbE (default mode)" single port (the file's mlxconfig listing and udev rail rules):
# 8 x 400 Gb/s RoCE, one a GPU, the catalogue's roce_400g (NCCL's own IB verbs transport). The file
# states "the line rate is 400GB/s" a node (8 x 400 Gb/s). Spectrum-X adaptive routing is not modelled
# (2 nodes).
_add(Cluster("dell_xe9680_h200_spcx", _server("dgx_h100", name="XE9680-H200", nic="roce_400g"), "roce_400g",
             "RoCE (Spectrum-X)", "H200",
             "Dell XE9680 H200: 8 H200 (NVLink 4 / NVSwitch) + 8 x BlueField-3 B3140H 400GbE SuperNICs on "
             "Spectrum-X RoCE, one a GPU (the source's mlxconfig listing and rail rules).", H200))

# BSC MareNostrum 5 ACC node, as hkanpak21/Comp390Project docs/MN5_NCCL_CONFIG.md (3288650) states it: "4x NVIDIA H100
# 64 GB SXM", "NV6 interconnect, 6 NVLink lanes" a GPU pair and "NVLS multicast support is not available" (its text
# also says "NVSwitch all-to-all", which NV6 and no NVLS contradict: a 4-GPU NVLink mesh of MESH4_LINKS = 6 a pair, as
# the source prints), "5x HCA per node -- mlx5_0,1,2,4,5 IB; mlx5_2 is RoCE", all five used by NCCL ("NET/IB : Using
# [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/RoCE [3]mlx5_4:1/IB [4]mlx5_5:1/IB", NCCL_IB_HCA=mlx5), GPUDirect RDMA.
# The port rates are not printed: 4 InfiniBand ports of 200 Gb/s, one a GPU (BSC's published MN5 ACC node
# specification, 4 x NDR200 a node; not read in this session: an assumption), as the catalogue's 200 Gb/s ib_hdr (as
# snellius_h100). The RoCE port (rate and placement unknown) is not modelled. H100 64GB: the catalogue's h100_sxm
# (the collectives see NVLink 4 and Hopper; the memory size does not enter them). Host CPU not stated by the source
# (the server model's default).
_add(Cluster("bsc_mn5_acc_h100", _mesh4("dgx_h100", name="mn5-acc-h100", nics=4, nic="ib_hdr"), "ib_hdr",
             "InfiniBand", "H100",
             "BSC MareNostrum 5 ACC node: 4 H100 64GB SXM on an NVLink 4 mesh without NVSwitch ('NV6', no NVLS: "
             "hkanpak21/Comp390Project docs/MN5_NCCL_CONFIG.md) + 4 InfiniBand ports, one a GPU, of 200 Gb/s (rate not "
             "in the source: BSC's 4 x NDR200 a node, assumed) as ib_hdr; the 5th HCA (RoCE) NCCL also used is not "
             "modelled."))
# NVIDIA/nccl#652 (2022-03-18): "a 32 node 8xA100-SXM4 cluster each node of which has 4 IB HDR cards for a total of 100
# GB/s bandwidth". An 8-GPU A100-SXM4 node is an HGX A100 8-GPU baseboard (NVLink 3 / NVSwitch): the DGX A100 server
# with 4 NICs of 200 Gb/s HDR, one shared by each GPU pair (as abci_a_node and aws_p4d). GPU memory (40 or 80 GB),
# host CPU and fabric are not stated: the server model's defaults, the rail-optimised graph.
_add(Cluster("a100_4hdr_nccl652", _server("dgx_a100", name="a100-sxm4-4hdr", nics=4), "ib_hdr", "InfiniBand", "A100",
             "8 A100-SXM4 (HGX A100 baseboard: NVLink 3 / NVSwitch) + 4 x InfiniBand HDR 200 Gb/s a node, one a GPU "
             "pair ('4 IB HDR cards for a total of 100 GB/s', NVIDIA/nccl#652); memory, CPU and fabric not stated."))

# Azure NDm A100 v4 (Standard_ND96amsr_A100_v4; Azure docs, MicrosoftDocs/azure-docs articles/virtual-machines/sizes/
# gpu-accelerated/includes/ndm-a100-v4-series-summary.md at 1e4c740: "eight NVIDIA Ampere A100 80GB Tensor Core GPUs",
# "1.6 TB/s of interconnect bandwidth per VM", "Each GPU within the VM is provided with its own dedicated,
# topology-agnostic 200 GB/s NVIDIA Mellanox HDR InfiniBand connection", "NVLINK 3.0", "AMD Epyc 7V12 (Rome)"; HDR is
# 200 Gb/s a port, so the page's GB/s and TB/s are Gb/s and Tb/s -- the source's 189 GB/s busbw across 2 VMs is 8 x 25
# GB/s, not 8 x 200 GB/s). The source
# (JingchaoZhang/JingchaoZhang.github.io _posts/2023-09-11-NCCL test on AKS NDmV4 VM.md at da69a42) shows it itself: the
# node labels 'nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB', 'nvidia.com/gpu.count=8' and 'nvidia.com/mlnxnics: 8', and
# the Azure topology file the run loads (NCCL_TOPO_FILE=ndv4-topo.xml, printed in the post) puts each GPU (class 0x030200)
# with one InfiniBand controller (class 0x020700) on the same PCIe bridge, under AMD family 23 model 49 (EPYC Rome) CPUs.
# The DGX A100 server as it is (NVLink 3 / NVSwitch, 8 x 200 Gb/s HDR one a GPU, AMD host); the rate is Azure's series
# page (HDR), not printed in the post. Azure's fabric (fat tree) is not modelled: 2 VMs, the rail-optimised graph.
_add(Cluster("azure_ndm_a100_v4", tp.get_server("dgx_a100").with_(name="ndm_a100_v4"), "ib_hdr", "InfiniBand", "A100",
             "Azure NDm A100 v4 (ND96amsr_A100_v4): 8 A100 80GB SXM4 on NVLink 3 / NVSwitch + 8 x 200 Gb/s HDR "
             "InfiniBand, one a GPU (Azure series page; 8 mlnxnics and Azure's ndv4-topo.xml GPU/NIC pairs in the "
             "source), AMD EPYC hosts (the topology file's CPUs)."))

# CINECA Leonardo Booster node, as NVIDIA/nccl-tests#331 (mredenti, 2025-07) shows it: 4 GPUs printed "NVIDIA
# A100-SXM-64GB" (a 64 GB A100 SXM part), nvidia-smi topo "NV4" between every GPU pair (4 NVLink 3 links a pair, no
# NVSwitch: an NVLink mesh) and 4 InfiniBand HCAs mlx5_0-3, each "PXB" to one GPU (NCCL's "NET/IB : Using [0]mlx5_0:1/IB
# ... [3]mlx5_3:1/IB"). The catalogue's polaris_a100 server is that mesh (A100, NVLink 3, 4 links a pair); its 4 NICs
# sit on the GPUs' PCIe switches (nics_on="gpu", as Perlmutter's). The HCA rate is not printed: CINECA's Leonardo
# pages give HDR100 ports (not read in this session); the only curve is one node's sendrecv, which uses no NIC, so the
# catalogue's ib_hdr stands in and does not enter the result. The 64 GB memory does not enter a collective either (the
# server's a100_40gb is kept). Host CPU not stated by the source (the server model's default).
_add(Cluster("leonardo_booster_a100", _server("polaris_a100", name="leonardo-booster-a100", nics=4, nics_on="gpu",
                                              nic="ib_hdr"), "ib_hdr", "InfiniBand", "A100",
             "CINECA Leonardo Booster node: 4 A100-SXM-64GB on an NVLink 3 mesh, NV4 a pair, no NVSwitch (nvidia-smi topo "
             "in NVIDIA/nccl-tests#331) + 4 IB HCAs, one PXB to each GPU; HCA rate not printed (ib_hdr stands in: "
             "unused by the single-node curve)."))

# CSCS Alps GH200 node under a uenv (boeschf/nccl-benchmark-on-alps-2025 at 897cff4: Fabian Boesch's, CSCS, scaling runs):
# the node of cscs_alps_gh200 (4 GH200 printed "NVIDIA GH200 120GB" a node; NVLink 4 mesh, no NVSwitch, MESH4_LINKS a
# pair assumed; one 200 Gb/s Slingshot 11 NIC a GH200, CSCS docs as for cscs_alps_gh200), run from a uenv with NCCL 2.23.4
# and aws-ofi-nccl 1.13.0 (the uenv's name) rather than the container hook: the job scripts set NCCL_NET='AWS Libfabric',
# NCCL_NET_GDR_LEVEL=PHB, NCCL_CROSS_NIC=0, FI_CXI_RX_MATCH_MODE=software and no NCCL_PROTO (the hook's ^LL128 is not
# there) and no FI_CXI_RDZV_*: Kestrel's all-protocol Slingshot link (SLINGSHOT_ALL_PROTOCOLS: aws-ofi-nccl off AWS
# reports no network latency; libfabric CXI's default rendezvous thresholds). Grace hosts (Arm). Alps' dragonfly groups
# are not modelled (rail-optimised graph), which the 8-128 node runs may cross. Each GH200's NIC hangs off its Grace CPU,
# which the GPU reaches over C2C: NCCL 2.23.4 has no C2C or P2C path type (v2.23.4-1 src/graph/topo.h: LOC NVL NVB PIX
# PXB PXN PHB SYS NET), so the GPU's path to it is PHB, as the job scripts' NCCL_NET_GDR_LEVEL=PHB says (NCCL's default
# GPUDirect level is PXB): nics_on="cpu" (typeInter PHB: no LL128 across nodes, tuning.cc's rule; no PXN relay).
_add(Cluster("cscs_alps_gh200_uenv", _mesh4("dgx_h100", name="alps-gh200-uenv", nics=4, nic=SLINGSHOT_ALL_PROTOCOLS,
                                            cpu="arm", nics_on="cpu"),
             SLINGSHOT_ALL_PROTOCOLS, "Slingshot", "GH200",
             "CSCS Alps GH200 node in a uenv (NCCL 2.23.4 + aws-ofi-nccl 1.13.0): 4 GH200 (NVLink 4 mesh, no NVSwitch, 6 links "
             "a pair assumed) + 4 x 200 Gb/s Slingshot 11 NICs, one a GH200 on its Grace (CSCS docs; PHB to NCCL 2.23.4: no "
             "LL128 across nodes); no NCCL_PROTO in the job scripts: all protocols, no reported network latency; dragonfly "
             "not modelled."))

# thomaslie210/NCCL_Test_Results (83dd17d): two hosts n013 / n014, each with one "NVIDIA A100-PCIE-40GB" and one
# InfiniBand HCA (NCCL_IB_HCA=mlx5_2), as NCCL_DEBUG=INFO prints them: "+ PCI[24.0] - GPU/81000" and "+ PCI[24.0] -
# NIC/D1000 ... NET[25.0]" both under "CPU/1" (GPU-NIC path PHB: the NIC on the CPU's root complex, not under the GPU's
# PCIe switch), "NCCL_NET_GDR_LEVEL set by environment to SYS" and "GPU Direct RDMA Enabled" (GDRDMA on every channel).
# NET[25.0] is 200 Gb/s: the catalogue's ib_hdr. The PCIe A100 sits on PCIe 4.0 x16 (NVIDIA A100 PCIe datasheet; NCCL's
# PCI[24.0] is its 24 GB/s view of Gen4 x16): host_link pcie4. Modelled as a one-GPU server whose NIC hangs off the CPU
# (the dgx_a100 server cut to 1 GPU and 1 NIC with nics_on="cpu": NCCL's typeInter PHB, so no LL128 across the hosts,
# as NCCL 2.16's rule); its NVLink is not used by one GPU. The GPU model is the catalogue's a100_40gb (Ampere: the
# collectives see the generation; the PCIe part's clocks and 250 W cap are not modelled). Host CPU not stated (the log's
# CPU/1 only): Intel, the server model's default. Two hosts: the rail-optimised graph's one switch.
_add(Cluster("a100_pcie_1hdr", _server("dgx_a100", name="a100-pcie-1hdr", gpus=1, nics=1, nics_on="cpu",
                                       host_link="pcie4", gpu="a100_40gb", cpu="intel"), "ib_hdr", "InfiniBand", "A100",
             "1 A100-PCIE-40GB a host (PCIe 4.0 x16) + 1 InfiniBand HCA of 200 Gb/s (NCCL's NET[25.0]) on the CPU's root "
             "complex (PHB), GPUDirect RDMA by NCCL_NET_GDR_LEVEL=SYS (thomaslie210/NCCL_Test_Results logs); a one-GPU "
             "server with its NIC on the CPU.", A100_40GB))

# GitHub user ProHuper's H100 cluster (NVIDIA/nccl-tests#232, NVIDIA/nccl#1357, #1411; hosts qh100-gpu19/20): 8 H100 SXM a
# node on NVSwitch (NV18 between every pair), 6 NICs in nvidia-smi topo -m of which NIC0-3 sit PIX to GPU0 / 2 / 4 / 6;
# RoCE (NCCL_IB_GID_INDEX=3 in every run), 400 Gb/s a NIC from the reporter's "theoretical busbw should be 200" for 4
# NICs (an inference: the speed is not printed). The runs taken use GPU0 alone (#232) or GPUs 0, 2, 4, 6 (#1411), each
# with its own PIX NIC: modelled as the 4 GPUs that have a NIC, one 400 Gb/s RoCE NIC each, on NVSwitch. #232 names 3
# further NICs in NCCL_IB_HCA that are SYS from GPU0: not modelled (GPU0's PCIe 5.0 x16 caps it near one NIC).
_add(Cluster("prohuper_h100_roce", _server("dgx_h100", name="qh100-roce-4", gpus=4, nics=4, nic="roce_400g"), "roce_400g",
             "RoCE", "H100",
             "ProHuper's H100 nodes (NVIDIA/nccl-tests#232, NVIDIA/nccl#1411): H100 SXM on NVSwitch, NIC0-3 PIX to GPUs "
             "0/2/4/6, RoCE (NCCL_IB_GID_INDEX=3), 400 Gb/s a NIC inferred from 'theoretical busbw should be 200' for 4 "
             "NICs; the 4 GPUs with a NIC modelled (the runs use GPU0 or GPUs 0,2,4,6), one NIC each."))

# --- Training clusters ---------------------------------------------------------------------
# Meta Grand Teton (torchtitan benchmarks): 8 H100 SXM 96GB HBM2e at a 500 W cap per host,
# "backend RDMA 400 Gb/s per GPU" (Meta's RoCE training fabric, Llama 3 paper section 3.3.1).
# The 500 W cap lowers clocks; no published peak exists for it, so the H100 SXM peaks are used.
_add(Cluster("meta_grand_teton", _server("dgx_h100", name="grand-teton-h100", nic="roce_400g"), "roce_400g",
             "RoCE", "H100",
             "Meta Grand Teton: 8 H100 SXM (96 GB HBM2e at 2.4 TB/s, run at the default 500 W cap: "
             "h100_sxm_hbm2e, power_cap=500) + 400 Gb/s RDMA per GPU (RoCE, Llama 3 paper 3.3.1).", H100_HBM2E))
# WhiteFiber (Trainy benchmark): 8 H200 per host, 400 Gb/s ConnectX-7 per GPU; IB vs RoCE not
# stated: NDR InfiniBand (the same 400 Gb/s) taken.
_add(Cluster("whitefiber_h200", _server("dgx_h100", name="whitefiber-h200"), "ib_ndr",
             "InfiniBand (assumed)", "H200",
             "WhiteFiber: 8 H200 + 400 Gb/s CX-7 per GPU (the benchmark file); fabric type not stated: NDR "
             "InfiniBand assumed.", H200))
# MosaicML A100 (llm-foundry benchmarks): 8 A100 (40 or 80 GB) per node, "1600 Gbps node-node
# interconnect (RoCE)" -> 8 x 200 Gb/s RoCE.
_add(Cluster("mosaic_a100_roce", _server("dgx_a100", name="mosaic-a100", nic="roce_200g"), "roce_200g", "RoCE",
             "A100",
             "MosaicML A100: 8 A100 SXM + 1,600 Gb/s RoCE per node (llm-foundry benchmark README) = 8 x 200 "
             "Gb/s RoCE; the 40 GB parts take the catalogue's a100_40gb (training_call)."))
# MosaicML H100 (llm-foundry benchmarks): interconnect not stated -> the library's default
# cluster, DGX H100 with 8 x 400 Gb/s NDR.
_add(Cluster("mosaic_h100", tp.get_server("dgx_h100").with_(name="mosaic-h100"), "ib_ndr",
             "InfiniBand (assumed)", "H100",
             "MosaicML H100 80GB: interconnect not stated; the library's default DGX H100 + 8 x 400 Gb/s NDR."))
# InternLM's 7B scaling cluster (InternLM/InternLM doc/en/train_performance.md at 20fe5ac, its hardware table: "GPU |
# nvidia_a100-sxm4-80gb", "Inter-machine bandwidth | 4 * 100Gb RoCE", "CPU | 128 core Intel(R) Xeon(R) CPU"; its
# "zero1=8 ... within 8 GPUs in a single node": 8 GPUs a node). An 8-GPU A100 SXM4 node is an HGX A100 baseboard
# (NVLink 3 / NVSwitch): the DGX A100 server with 4 NICs of 100 Gb/s RoCE, one shared by each GPU pair (as p4d's
# and ABCI's 4 NICs), Intel hosts. The catalogue has no roce_100g: eth_100g has the rate (as OCI's BM.GPU4.8).
# The fabric's topology is not stated: the rail-optimised graph.
_add(Cluster("internlm_a100_roce", _server("dgx_a100", name="internlm-a100-roce", nics=4, nic="eth_100g",
                                           cpu="intel"), "eth_100g", "RoCE", "A100",
             "InternLM's A100 cluster: 8 A100-SXM4-80GB a node (NVLink 3 / NVSwitch) + '4 * 100Gb RoCE' inter-machine "
             "bandwidth, Intel hosts (InternLM train_performance.md); one 100 Gb/s NIC a GPU pair, as 100 Gb/s "
             "Ethernet ports (no roce_100g in the catalogue; same rate); fabric topology not stated."))
# Jean Zay A100 partition (BLOOM training README): 8 A100 80GB per node with NVLink, 4 Omni-Path
# 100 Gb/s links per node on a dedicated NCCL subnet. Omni-Path is not in the catalogue:
# eth_100g has its rate; its lower switch latency does not show in 100-second steps.
_add(Cluster("jean_zay_a100", _server("dgx_a100", name="jean-zay-a100", nics=4, nic="eth_100g"), "eth_100g",
             "Omni-Path", "A100",
             "Jean Zay: 8 A100 80GB (NVLink 3 / NVSwitch) + 4 x 100 Gb/s Omni-Path per node (BLOOM README), as "
             "4 x 100 Gb/s Ethernet NICs (rate only)."))


# DGX GB200 NVL72 (NVIDIA DGX GB200 user guide / datasheet): a rack is one NVLink 5 domain of 72
# GB200 GPUs (18 compute trays of 4); compute fabric one ConnectX-7 400 Gb/s NDR InfiniBand port per
# GPU (72 OSFP ports per rack) between racks. Megatron-Bridge's DGX-GB200 rows run 8, 64 or 256
# GPUs, which a 72-GPU rack does not divide: a "server" here is the 64 GPUs (16 trays) of a rack
# that a run uses (the catalogue's nvl72 cut to 64 GPUs and 64 NICs), an assumption: the page does
# not say how the GPUs lie over racks. An 8-GPU run is 2 trays of one rack (the 64-GPU server's
# first 8 GPUs, the same NVLink 5 switch).
_add(Cluster("dgx_gb200_nvl72", _server("nvl72", name="dgx-gb200-nvl72-64", gpus=64, nics=64), "ib_ndr",
             "NVL72 MNNVL", "GB200",
             "DGX GB200 NVL72: NVLink 5 domain per rack, 1 x 400 Gb/s NDR per GPU between racks (DGX GB200 "
             "datasheet); a run's 64 GPUs of a rack as one 64-GPU NVLink server (placement not published)."))
# The same rack for a run of fewer GPUs than the 64 (the 8-GPU rows: 2 compute trays on the rack's
# NVLink 5 switch trays): the nvl72 server cut to the run's 8 GPUs.
_add(Cluster("dgx_gb200_nvl72_8", _server("nvl72", name="dgx-gb200-nvl72-8", gpus=8, nics=8), "ib_ndr",
             "NVL72 MNNVL", "GB200",
             "DGX GB200 NVL72, 8 GPUs (2 trays) of a rack on its NVLink 5 switch trays; 400 Gb/s NDR per GPU."))
#: a cluster whose server holds more GPUs than a small run uses -> the cluster cut to that run
_SMALL_RUN = {("dgx_gb200_nvl72", 8): "dgx_gb200_nvl72_8"}

@lru_cache(maxsize=None)
def _graph(name: str, servers: int):
    c = CLUSTERS[name]
    return tp.rail_optimized(servers, server=c.server, link=c.link)


# --- collectives ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CurveSetup:
    """How one corpus curve is run.

    ``cluster``: a CLUSTERS key. ``placement``: ``"per_node"`` (corpus node i is server i; its
    first ``gpus_per_node`` GPUs take part) or ``"nvl72"`` (corpus nodes are 4-GPU trays of
    NVL72 racks: ``racks`` racks, the trays split evenly over them, the first trays of each
    rack). ``algorithm``: ``"auto"`` (NCCL's choice) unless the run forced one.
    ``op``: the library's op when the corpus name differs. ``note``: what is assumed.
    ``protocol``: the protocol(s) the run forced with NCCL_PROTO (``"auto"``: NCCL's choice).
    """

    cluster: str
    algorithm: str = "auto"
    placement: str = "per_node"
    racks: int = 1
    note: str = ""
    # where the machine lacks an algorithm the model's server would offer (NVLS without an
    # NVSwitch), "auto" is NCCL's argmin over these only: the least time among them, each at
    # NCCL's choice of protocol
    candidates: tuple = ()
    # nccl-tests' sendrecv on several GPUs a node over several nodes: the ranks given with the
    # ring shift's pair across the network first (the last GPU of node 0 to the first of node 1),
    # which flowsolver's send_recv times in the communicator of all of them
    network_pair_first: bool = False
    # the protocol the run forced (NCCL_PROTO set to one protocol, or a list NCCL chooses among: collective()'s
    # protocol=); "auto" (NCCL's choice) unless the run forced it
    protocol: "str | tuple" = "auto"


#: corpus op names -> flowsolver's
OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
       "alltoall": "all_to_all", "sendrecv": "send_recv", "broadcast": "broadcast"}

_TORCH = ("PyTorch all_reduce_bench.py (torch.distributed.all_reduce on NCCL), not nccl-tests: the same NCCL "
          "call plus PyTorch's launch; busbw with nccl-tests' factor")

_NO_NVLS = ("ring", "tree")

CURVES: dict[str, CurveSetup] = {
    "gcp-a3mega-2x8H100-allreduce": CurveSetup(
        "gcp_a3_mega", note="${HOST_VARS} not shown: GCP's Simple profile (its 123 us floor is NCCL's Simple latency "
                            "on 2 x 8; LL128's would be 48 us)"),
    "aws-eks-2xp5-allreduce-excerpt": CurveSetup("aws_p5"),
    # The Azure pages say "NVLS algorithm" for every VM (text shared across the pages, corpus
    # README caveats): NVLS forced on H100 / H200 (NCCL_ALGO=NVLS in the script); A100 has no
    # NVLink SHARP, so NCCL_ALGO=NVLS cannot have been what ran: NCCL's own choice there.
    "azure-nd_a100_v4-1x8-allreduce-nvls": CurveSetup(
        "azure_nd_a100_v4", note="A100 has no NVLS: the corpus README says the page's 'NVLS' text is shared "
                                 "across pages; NCCL's choice taken"),
    "azure-nd_h100_v5-1x8-allreduce-nvls": CurveSetup("azure_nd_h100_v5", "nvls", note="NCCL_ALGO=NVLS"),
    "azure-nd_h200_v5-1x8-allreduce-nvls": CurveSetup("azure_nd_h200_v5", "nvls", note="NCCL_ALGO=NVLS"),
    "azure-nd_gb200_v6-1x4-allreduce-ring": CurveSetup("azure_nd_gb200_v6", "ring", note="NCCL_ALGO=Ring"),
    # the Alps node has no NVSwitch, so no NVLS: NCCL chooses between ring and tree
    "cscs-alps-2x4GH200-allreduce": CurveSetup("cscs_alps_gh200", candidates=_NO_NVLS,
                                               note="no NVSwitch on the node: NCCL's choice among ring / tree"),
    # eth-cscs/cray-network-stack (d348263) examples/container/nccl-tests: srun -N2 --ntasks-per-node=4 on Santis (an
    # Alps vCluster), a container carrying its own CXI stack and libfabric 2.1 (CXI hook off), aws-ofi-nccl from the
    # Container Engine's hook 1.14 (the Alps NCCL settings, LL128 off: the cluster's alps_ofi_cxi transport)
    "cscs-santis-cxi-container-2x4GH200-allreduce": CurveSetup(
        "cscs_alps_gh200", candidates=_NO_NVLS,
        note="no NVSwitch on the node: NCCL's choice among ring / tree; container CXI stack + aws-ofi-nccl hook 1.14"),
    "cscs-alps-2x4GH200-allreduce-nocxi": CurveSetup("cscs_alps_gh200", candidates=_NO_NVLS,
                                                     note="no NVSwitch on the node: NCCL's choice among ring / tree"),
    "dgxc-dgxh100-1x8-allreduce": CurveSetup("dgx_h100_ndr"),
    # gke-rdma.md: 2 pods x 8 GPUs, each claiming all 8 RDMA NICs ("count: 8"), one rank per GPU
    # ("nThread 1 nGpus 1", 16 ranks), NCCL 2.26.6 with the gIB plugin and its set_nccl_env.sh, whose
    # NCCL_TUNER_CONFIG_PATH (tuner_config_a4.txtpb) is not public: NCCL's own choice taken
    "dranet-gke-a4-2x8B200-allgather": CurveSetup("gcp_a4", note="gIB's tuner configuration not public: "
                                                                 "NCCL's choice taken"),
    "dranet-gke-a4-1x2B200-allgather": CurveSetup("gcp_a4", note="2 GPUs of one A4 node"),
    # nvidia-dranet.md: each pod claims GPUs 0-1 and 2 RDMA NICs under one PCIe root
    # ("matchAttribute: resource.kubernetes.io/pcieRoot"); the run is "-g 1", one rank per pod on
    # "device 0 [0000:8f:00]", whose own NIC (gpu0rdma0) shares its PCIe switch: GPUDirect RDMA
    "dranet-gke-a4-2x1B200-allgather": CurveSetup("gcp_a4", note="one GPU (and its NIC, PCIe-aligned) on each of "
                                                                 "2 A4 nodes"),
    "dranet-gke-2x1H200-allgather": CurveSetup("gcp_a3_ultra", note="one GPU and one NIC on each of 2 nodes; the "
                                                                    "NIC is not the GPU's (EXCLUDED)"),
    "dranet-gke-2x1H200-allreduce-mpiop": CurveSetup("gcp_a3_ultra", note="one GPU + one NIC on each of 2 nodes; "
                                                                          "the NIC is not the GPU's (EXCLUDED)"),
    "dranet-oke-gb200v3-16x4-allreduce-mnnvl": CurveSetup(
        "oci_gb200_nvl72", placement="nvl72", racks=1, note="16 trays of one NVL72 rack (64 ranks, MNNVL)"),
    "dstack-gcp-a4-2x8B200-allreduce": CurveSetup("gcp_a4"),
    "dstack-gcp-a3mega-2x8H100-allgather": CurveSetup("gcp_a3_mega_ll128",
                                                      note="the run sources GCP's nccl-env-profile-ll128.sh"),
    "dstack-lambda1cc-2x8B200-allreduce": CurveSetup("lambda_1cc_b200"),
    # skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md: 2 x a3-ultragpu-8g on GKE, one rank per
    # GPU (-np 16 -N 8 -g 1), gIB plugin with its set_nccl_env.sh (tuner configuration not public, as for
    # the dranet A4 runs): NCCL's choice taken
    "skypilot-gke-a3ultra-2x8H200-allgather": CurveSetup("gcp_a3_ultra", note="gIB's tuner configuration not "
                                                                               "public: NCCL's choice taken"),
    "skypilot-gke-a3ultra-2x8H200-allgather-gcppod": CurveSetup("gcp_a3_ultra", note="GCP's own test pod and gIB "
                                                                                      "script: NCCL's choice taken"),
    "dstack-nebius-2x8H100-allreduce": CurveSetup("nebius_h100"),
    # argonne-lcf/oci-howto 4_jobscript.md: oci-hpc's nccl_run_allreduce.sbatch on 2 H200 nodes, one rank a GPU;
    # the script's NCCL_* settings are not shown: NCCL's choice taken
    "argonne-oci-2x8H200-allreduce": CurveSetup("oci_bm_gpu_h200_8", note="oci-hpc sample script (settings not "
                                                                          "shown): NCCL's choice"),
    # Nebius Run:ai cookbook: mpirun -np 16 --map-by ppr:8:node, one rank a GPU, no NCCL_ALGO / NCCL_PROTO set
    "nebius-runai-2x8H200-allreduce": CurveSetup("nebius_h200", note="Run:ai MPI job, NCCL's choice"),
    # AWS DLAMI guide (p4d.24xlarge): mpirun -n 16 -N 8, one rank a GPU, no NCCL_ALGO / NCCL_PROTO set
    "aws-dlami-2xp4d-allreduce": CurveSetup("aws_p4d", note="DLAMI guide's 2-node example: NCCL's choice"),
    # sdambo-git/spc-x-host-configuration: one process a node driving 8 GPUs (--ngpus 8, nccl-tests' -g),
    # no NCCL_ALGO / NCCL_PROTO set. Its NCCL_MIN_NCHANNELS=32 is not passed as channels=: NCCL 2.30 copies
    # only the ring / tree channels up to it (src/graph/connect.cc copyChannels), keeps the NVLS channels
    # and tunes on the searched graphs' nChannels (src/graph/tuning.cc), where channels= would set all three
    "spcx-ocp-2x8H200-allreduce": CurveSetup("dell_xe9680_h200_spcx", note="OpenShift pods, --ngpus 8: NCCL's "
                                                                            "choice"),
    # aistabci/abci2.0benchmark allreduce/: mpirun one process a GPU (-t 1 -g 1, ppr:4:socket), NCCL 2.8.4, no
    # NCCL_ALGO / NCCL_PROTO set: NCCL's choice. 1 x 4: the job's NPPN=4 on one node, its first 4 GPUs.
    **{f"abci-a-{n}x{g}A100-allreduce": CurveSetup(
        "abci_a_node", note=("one ABCI A node (NVSwitch)" if n == 1 else f"{n} ABCI A nodes, 4 x HDR each") +
                            ("; its first 4 GPUs" if g == 4 else "") + ": NCCL's choice")
       for n, g in ((1, 4), (1, 8), (2, 8), (4, 8), (8, 8), (16, 8))},
    # aws-samples/aws-efa-eks README: 2 x p4d.24xlarge on EKS, one rank a GPU. The NCCL 2.8.3 run is the
    # manifest at the same commit (examples/nccl-efa-tests.yaml: -x NCCL_ALGO=RING, -b 8 -e 1G -n 1000, as the
    # log's header): Ring forced. The 2.9.9 run's command is not shown (its header matches no manifest of
    # the repository): NCCL's choice
    "aws-efa-eks-2xp4d-allreduce-ring-nccl2.8.3": CurveSetup("aws_p4d", "ring", note="NCCL_ALGO=RING (the manifest)"),
    "aws-efa-eks-2xp4d-allreduce-nccl2.9.9": CurveSetup("aws_p4d", note="command not shown: NCCL's choice"),
    # aws-samples/aws-hpc-tutorials (5ef4879, content/08-EFA/05-compile-run-nccl-tests.md): sbatch -N 2, mpirun
    # --map-by ppr:8:node, -g 1 (16 ranks), NCCL 2.17.1 built by the page's script, aws-ofi-nccl 1.5.0aws,
    # NCCL_PROTO=simple exported: Simple forced, the algorithm NCCL's choice
    "aws-hpcworkshop-2xp4de-allreduce-simple": CurveSetup(
        "aws_p4de", protocol="Simple", note="NCCL_PROTO=simple (the sbatch); algorithm NCCL's choice"),
    # NVIDIA/nccl-tests#309: Dell PowerEdge XE9680 (HGX H100 8-GPU baseboard, NVLink 4 / NVSwitch) with
    # 8 x ConnectX-7 400 Gb/s InfiniBand, one per GPU (stated in the issue): the DGX H100 layout
    "nccltests309-2x8H100-allreduce": CurveSetup("dgx_h100_ndr", note="Dell XE9680 HGX H100, 8 x CX-7 400 Gb/s IB "
                                                                      "(the issue); NCCL 2.26.2, NCCL's choice"),
    # coreweave/nccl-tests README 'Expected Performance / GB200': a full rack (18 trays, 72 ranks) and 20 racks
    # (360 trays, 1440 ranks). The single-rack table was posted in PR #43 (2025-02) when the example script ran
    # NCCL_NVLS_ENABLE=1 (NCCL 2.25.1), before a736384 turned NVLS off: NCCL's choice taken, NVLS included. The
    # 20-rack table first appears in bee97e7, whose script sets NCCL_NVLS_ENABLE=0: ring / tree only.
    "coreweave-gb200-18x4-allreduce-1rack": CurveSetup(
        "coreweave_gb200_nvl72", placement="nvl72", racks=1,
        note="18 trays of one NVL72 rack (72 ranks, MNNVL); NVLS setting of the run uncertain: NCCL's choice"),
    "coreweave-gb200-360x4-allreduce-20racks": CurveSetup(
        "coreweave_gb200_nvl72", placement="nvl72", racks=20, candidates=_NO_NVLS,
        note="20 full racks of 18 trays (1440 ranks); NCCL_NVLS_ENABLE=0 in the script at the README's commit: "
             "NCCL's choice among ring / tree"),
    # NatLabRockies/ESIFHPC4 AI-ML/microbenchmark: Kestrel, 16 nodes x 4 H100, one rank a GPU, no NVSwitch
    "nrel-kestrel-16x4H100-allreduce": CurveSetup(
        "nrel_kestrel_h100", candidates=_NO_NVLS,
        note="NVLink 4 mesh without NVSwitch (no NVLS): NCCL's choice among ring / tree; 2 NICs for 4 GPUs"),
    # nccl-tests sendrecv with 8 GPUs: rank i sends to i+1 and receives from i-1, 8 pairs at
    # once. flowsolver's send_recv is one pair; on one NVSwitch every pair has its own GPU
    # links, so one pair's time is every pair's (the difference does not show here).
    "liplus-1x8A100-sendrecv": CurveSetup(
        "dgx_a100_hdr", "direct", note="8 concurrent ring-shift pairs timed as one pair (non-blocking NVSwitch)"),
    "mle-a100-1x8-allreduce-ncclt": CurveSetup("dgx_a100_hdr"),
    "mle-h200-1x8-allreduce-torch": CurveSetup("azure_nd_h200_v5", note=_TORCH + "; H200 8-GPU node (NVLink 4)"),
    "mle-b200-1x8-allreduce-torch": CurveSetup("aws_p6_b200", note=_TORCH),
    "mle-b200-4x8-allreduce-torch": CurveSetup(
        "aws_p6_b200", note=_TORCH + "; AWS's OFI tuner plugin chose the algorithms (not stated per size): "
                                     "NCCL's choice taken"),
    "mle-h200-nvls-sweep-default": CurveSetup("azure_nd_h200_v5", note="first n GPUs of one H200 node"),
    "mle-h200-nvls-sweep-nvlsoff": CurveSetup("azure_nd_h200_v5", "ring", note="NCCL_NVLS_ENABLE=0: Ring (stated)"),
    "mle-b200-nvls-sweep-default": CurveSetup("aws_p6_b200", note="first n GPUs of one p6-b200 node"),
    "mle-b200-nvls-sweep-nvlsoff": CurveSetup("aws_p6_b200", "ring", note="NCCL_NVLS_ENABLE=0: Ring (stated)"),
    "mle-h200-1x8-16G-all_reduce-NCCL_NVLS_ENABLE=1": CurveSetup("azure_nd_h200_v5", "nvls",
                                                                 note="NCCL_NVLS_ENABLE=1: NVLS (stated)"),
    "mle-h200-1x8-16G-all_reduce-NCCL_NVLS_ENABLE=0": CurveSetup("azure_nd_h200_v5", "ring",
                                                                 note="NCCL_NVLS_ENABLE=0: Ring (stated)"),
    "mle-h200-1x8-16G-all_gather-default": CurveSetup("azure_nd_h200_v5"),
    "mle-h200-1x8-16G-reduce_scatter-default": CurveSetup("azure_nd_h200_v5"),
    # three 4 GiB points: NCCL_ALGO=ring, the default (AWS's OFI tuner chose Ring, as the
    # sentence says), NCCL_ALGO=nvlstree -- the algorithm is per row (ROW_ALGORITHM below)
    "mle-h200-4x8-p5en-4G-algos": CurveSetup("aws_p5en", note="algorithm per row from its env (ring / ring chosen "
                                                                "by the OFI tuner / nvlstree)"),
    "ociqs-gb200-1x4-allreduce": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=1, note="one tray"),
    "ociqs-gb200-32x4-allreduce": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=2,
                                             note="2 racks (the source); 16 trays each assumed"),
    "ociqs-gb200-48x4-allreduce": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=3,
                                             note="3 racks (the source); 16 trays each assumed"),
    "ociqs-gb200-1x4-alltoall": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=1, note="one tray"),
    "ociqs-gb200-2x4-alltoall": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=1,
                                           note="both hosts in one rack (the source)"),
    "ociqs-gb200-16x4-alltoall": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=1, note="1 rack"),
    "ociqs-gb200-32x4-alltoall": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=2,
                                            note="2 racks; 16 trays each assumed"),
    "ociqs-gb200-48x4-alltoall": CurveSetup("oci_gb200_nvl72", placement="nvl72", racks=3,
                                            note="3 racks; 16 trays each assumed"),
    "ociqs-gb300-1x4-allreduce": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1, note="one tray"),
    "ociqs-gb300-2x4-allreduce": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1,
                                            note="2 trays of one rack (MNNVL)"),
    "ociqs-gb300-16x4-allreduce": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1, note="1 rack"),
    "ociqs-gb300-32x4-allreduce": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=2,
                                             note="32 trays > 18: 2 racks, 16 trays each assumed"),
    "ociqs-gb300-1x4-alltoall": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1, note="one tray"),
    "ociqs-gb300-2x4-alltoall": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1,
                                           note="2 trays of one rack (MNNVL)"),
    "ociqs-gb300-16x4-alltoall": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=1, note="1 rack"),
    "ociqs-gb300-32x4-alltoall": CurveSetup("oci_gb300_nvl72", placement="nvl72", racks=2,
                                            note="32 trays > 18: 2 racks, 16 trays each assumed"),
    "ociqs-b300-1x8-allreduce": CurveSetup("oci_bm_gpu_b300_8"),
    "ociqs-b300-2x8-allreduce": CurveSetup("oci_bm_gpu_b300_8"),
    "ociqs-b300-1x8-alltoall": CurveSetup("oci_bm_gpu_b300_8"),
    "ociqs-b300-2x8-alltoall": CurveSetup("oci_bm_gpu_b300_8"),
    "ocit-bm.gpu.h100.8-2x8-allreduce": CurveSetup("oci_bm_gpu_h100_8"),
    "ocit-bm.gpu4.8-1x8-allreduce-ubuntu": CurveSetup("oci_bm_gpu4_8"),
    "ocit-bm.gpu4.8-2x8-allreduce-ubuntu": CurveSetup("oci_bm_gpu4_8"),
    "ocit-bm.gpu4.8-1x8-allreduce-ol": CurveSetup("oci_bm_gpu4_8"),
    "ocit-bm.gpu4.8-2x8-allreduce-ol": CurveSetup("oci_bm_gpu4_8"),
    # xxrjun/nccl-tests-cluster example-cluster01: nodes of 8 H100 80GB HBM3 (SXM: the PCI ids and
    # 80GB HBM3 of the device list), NCCL 2.29.2, one srun task per GPU; the NICs and fabric are not
    # stated anywhere in the repository: the library's default cluster (DGX H100, 8 x 400 Gb/s NDR
    # InfiniBand, one NIC per GPU) is what an expert would build, as for mosaic_h100
    **{f"xxrjun-c01-{n}x{g}H100-{op}": CurveSetup(
        "dgx_h100_ndr", note=("fabric not stated: the library's default DGX H100 + 8 x 400 Gb/s NDR"
                              if n > 1 else "one node of 8 H100 SXM (NVLink 4 / NVSwitch)") + (
                              f"; the first {g} GPUs of each node" if g < 8 else ""))
       for n, gs, ops in ((10, (1, 2, 4, 8), ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")),
                          (2, (1, 2, 4, 8), ("alltoall", "sendrecv")),
                          (1, (4, 8), ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")))
       for g in gs for op in ops if not (op == "sendrecv" and n > 1 and g > 1)},
    # nccl-tests sendrecv on n ranks is a ring shift (rank r sends to r + 1, receives from r - 1),
    # all pairs at once, timed by the slowest. With several GPUs per node over several nodes the
    # slowest is a pair across the network (the last GPU of each node to the next node's first,
    # one such pair a node, no two on one NIC); the others are NVLink pairs on the same number of
    # channels a peer. flowsolver's send_recv times the first two ranks in the communicator of all
    # the ranks given (NCCL's channels a peer are the communicator's): that pair first.
    **{f"xxrjun-c01-{n}x{g}H100-sendrecv": CurveSetup(
        "dgx_h100_ndr", network_pair_first=True,
        note="fabric not stated: the library's default DGX H100 + 8 x 400 Gb/s NDR" + (
            f"; the first {g} GPUs of each node" if g < 8 else "") + "; the ring shift's network pair timed")
       for n in (2, 10) for g in (2, 4, 8)},
    # argonne-lcf/alcf-nccl-tests results_polaris/nccl_2_18: aprun one rank a GPU (-N 4, -g 1), the README's
    # setup (4) for all_reduce / all_gather and (5) for alltoall (FI_CXI_* settings, NCCL_NET_GDR_LEVEL=PHB,
    # NCCL_CROSS_NIC=1, NCCL_COLLNET_ENABLE=1: no SHARP on Slingshot); no NCCL_ALGO / NCCL_PROTO: NCCL's choice
    **{f"alcf-polaris-{n}x4A100-{op}": CurveSetup(
        "alcf_polaris_a100", note=f"{n} Polaris nodes, 2 Slingshot-11 NICs for 4 A100; setup "
                                  f"({5 if op == 'alltoall' else 4}) of the README: NCCL's choice")
       for n in (2, 8) for op in ("allreduce", "allgather", "alltoall")},
    # togethercomputer/together-nccl-tests benchmarks/B200/sendrecv-p2p-scaling: Together AI's B200 DGX Cloud
    # nodes, 8 B200 on NVLink 5 / NVSwitch + 8 x ConnectX-7 NDR 400 Gb/s InfiniBand a node (the repository's
    # reports: the DGX B200 layout); srun one task a GPU (-g 1), NCCL_NVLS_ENABLE=0 (no effect on send / recv),
    # no NCCL_ALGO / NCCL_PROTO. The ring shift's slowest pair crosses the network, as for xxrjun's runs.
    **{f"together-b200-{n}x8-sendrecv": CurveSetup(
        "dgx_b200_ndr", network_pair_first=True,
        note="Together AI B200 DGX Cloud, 8 x CX-7 400 Gb/s NDR a node (the repository's reports); the ring "
             "shift's network pair timed" + ("; the report attributes the 8-node drop to shared-fabric "
                                             "contention, not modelled" if n == 8 else ""))
       for n in (2, 4, 8)},
    # UNINETTSigma2/documentation hpc_machines/olivia/nccl_apptainer.md: srun one task a GPU (-g 1) on 2 nodes x 4
    # GH200, the host's NCCL 2.30.4 in an apptainer container, no NCCL_ALGO / NCCL_PROTO; no NVSwitch: no NVLS
    "nris-olivia-2x4GH200-allreduce": CurveSetup(
        "nris_olivia_gh200", candidates=_NO_NVLS,
        note="GH200 NVLink 4 mesh without NVSwitch (no NVLS): NCCL's choice among ring / tree"),
    # NERSC/nccl-ofi-plugin logs-regression/slurm-test-2.22-918494.out: srun one task a GPU on 2 nodes x 4 A100,
    # NCCL 2.22.3, no NCCL_ALGO / NCCL_PROTO (A100: no NVLS)
    # Google Cloud AI Hypercomputer docs, "Run NCCL on custom GKE clusters that use A4X Max": two pods (one a4x-max
    # instance each, 4 ranks a pod) "in distinct NVLink domains" (the page says the output is cross-domain RDMA), the gIB
    # plugin's scripts (tuner configuration not public): NCCL's choice
    "gcp-a4xmax-2x4GB300-allgather-crossdomain": CurveSetup(
        "gcp_a4x_max", placement="nvl72", racks=2,
        note="one A4X Max tray in each of 2 NVL72 domains (cross-domain, the page); gIB's tuner not public: NCCL's choice"),
    "nersc-perlmutter-2x4A100-allreduce-nccl2.22": CurveSetup(
        "nersc_perlmutter_a100", note="2 Perlmutter nodes, 4 Slingshot 11 NICs for 4 A100: NCCL's choice"),
    # sparticlesteve/podman-nccl-testing logs/shifter-nccl-tests-30743809.out (729344a): NERSC's Steven Farrell, 2 Perlmutter
    # nodes, srun one task a GPU (-g 1) in a shifter container (nersc/pytorch:24.06.01, NCCL 2.21.5) with NERSC's
    # nccl-plugin module (aws-ofi-nccl 1.6.0; NCCL_NET_GDR_LEVEL=PHB, NCCL_CROSS_NIC=1 printed), no NCCL_ALGO / NCCL_PROTO:
    # the Perlmutter node of nersc-nccl-ofi-plugin, NCCL's choice
    "nersc-perlmutter-2x4A100-allreduce-nccl2.21-shifter": CurveSetup(
        "nersc_perlmutter_a100", note="2 Perlmutter nodes (shifter container, NERSC nccl-plugin module): NCCL's choice"),
    # odissei-benchmarks/nccl-tests runs/ (Snellius): 2 nodes by srun, one task a GPU (-g 1); 1 node by one process
    # driving 4 GPUs (-g 4, read by gpus_per_thread); NCCL 2.22.3, no NCCL_ALGO / NCCL_PROTO. No NVSwitch, so no NVLS:
    # NCCL's choice among ring / tree for all_reduce, ring (its protocols) for all_gather / reduce_scatter
    **{f"snellius-{n}x4H100-{op}": CurveSetup(
        "snellius_h100", candidates=_NO_NVLS if op == "allreduce" else ("ring",),
        note=f"{n} Snellius H100 node{'s, 4 x 200 Gb/s InfiniBand for 4 GPUs' if n > 1 else ', NVLink mesh'}: NCCL's "
             f"choice without NVLS")
       for n in (1, 2) for op in ("allreduce", "allgather", "reducescatter")},
    # KeitaW/p5-nccl-test-2024-07-19 (1c78584): 2 x p5.48xlarge on EKS, mpirun -np 16 -N 8, -g 1, no NCCL_ALGO /
    # NCCL_PROTO. Its manifests (nccl-test.yaml at eadc0a6 and 1c78584) set NCCL_BUFFSIZE=8388608 and
    # NCCL_P2P_NET_CHUNKSIZE=524288; neither is applied: validate.py passes no NCCL_* setting to the library (only an
    # algorithm a run forced, -g N and PyTorch's call overhead), NCCL_BUFFSIZE is one the library does not model
    # (flowsolver/_nccl_env.py lists it among the settings that change the time but cannot be expressed: twice NCCL's
    # 4 MiB Simple buffer here) and NCCL_P2P_NET_CHUNKSIZE sizes send / receive chunks only, not all_reduce's. The
    # 2.20.3 run loads aws-ofi-nccl's tuner ('Using tuner plugin: nccl_ofi_tuner'), which the model does not copy.
    **{f"keitaw-p5-2x8-allreduce-nccl{v}": CurveSetup(
        "aws_p5", note="2 x p5.48xlarge on EKS, NCCL_BUFFSIZE=8 MiB (not modelled)" +
                       ("; aws-ofi-nccl's tuner chose (not modelled): NCCL's choice taken" if "ofituner" in v
                        else ": NCCL's choice"))
       for v in ("2.22.3", "2.22.3-rerun", "2.20.3-ofituner")},
    # hkanpak21/Comp390Project docs/MN5_NCCL_CONFIG.md (3288650): srun one task a GPU (-g 1; its
    # scripts/mn5/slurm_nccl_*.sh), NCCL 2.24.3, no NCCL_ALGO / NCCL_PROTO. No NVSwitch, so no NVLS: NCCL's choice
    # among ring / tree. NCCL_IB_HCA=mlx5 adds a RoCE port NCCL also used (not modelled, as any NCCL_IB_HCA:
    # flowsolver/_nccl_env.py)
    **{f"mn5-acc-{n}x4H100-allreduce": CurveSetup(
        "bsc_mn5_acc_h100", candidates=_NO_NVLS,
        note=f"{n} MareNostrum 5 ACC node" + ("s, 4 x 200 Gb/s InfiniBand (+ 1 RoCE port, not modelled)" if n > 1
                                               else ", NVLink mesh") + ": NCCL's choice without NVLS")
       for n in (1, 2, 4)},
    # JingchaoZhang.github.io 'NCCL test on AKS NDmV4 VM' (da69a42): a Volcano MPI job on 2 AKS nodes of
    # Standard_ND96amsr_A100_v4, mpirun -np 16 -npernode 8, -g 1, NCCL_TOPO_FILE=ndv4-topo.xml (Azure's, which the
    # model's one-NIC-a-GPU server already is), no NCCL_ALGO / NCCL_PROTO: NCCL's choice
    "azure-ndm_a100_v4-2x8A100-allreduce-aks": CurveSetup(
        "azure_ndm_a100_v4", note="2 x Azure NDm A100 v4 on AKS, 8 x 200 Gb/s HDR a VM: NCCL's choice"),
    # NVIDIA/nccl#652: 32 nodes x 8 A100-SXM4, 4 x HDR a node; command and NCCL version not in the readable part
    "nccl652-32x8A100-allreduce": CurveSetup(
        "a100_4hdr_nccl652", note="32 x 8 A100-SXM4, 4 x HDR a node (the issue); command not shown: NCCL's choice"),
    # NVIDIA/nccl-tests#331 (mredenti, 2025-07): sendrecv_perf on 2 GPUs of one Leonardo node (devices 0 and 1, NV4
    # between them), one process of 2 threads (-t 2 -g 1), NCCL 2.22.3, NCCL_P2P_LEVEL=NVL, no NCCL_ALGO / NCCL_PROTO:
    # NCCL's choice (P2P/direct pointer/read, 8 p2p channels a peer in the log)
    "nccltests331-leonardo-1x2A100-sendrecv": CurveSetup(
        "leonardo_booster_a100", note="2 GPUs of one Leonardo node (NVLink 3 mesh, NV4 a pair): NCCL's choice"),
    # NVIDIA/nccl-tests#309, gj-aion's comments (2025-06-18): 2, 4 and 8 of the 8 nodes of a cluster of 8 H100 80GB HBM3
    # a node on "IB 400G" whose "400 GB/s IB limit" is 8 x 400 Gb/s a node: the library's default cluster (DGX H100, 8 x
    # 400 Gb/s NDR, one a GPU; NIC model, board and fabric not stated, as xxrjun's). mpirun -N 8, -g 1, no NCCL_ALGO /
    # NCCL_PROTO: NCCL's choice. The two runs with NVIDIA's suggested NCCL_MIN_CTAS=24 and NCCL_IB_QPS_PER_CONNECTION=2
    # are run with the library's defaults: validate.py passes no NCCL_* setting to the library (only an algorithm a run
    # forced, -g N and PyTorch's call overhead), as for keitaw-p5 (NCCL_BUFFSIZE) and spcx (NCCL_MIN_NCHANNELS); the
    # 2-node one forced NCCL_ALGO=Ring, which is applied
    **{f"nccltests309-gjaion-{n}x8H100-allreduce": CurveSetup(
        "dgx_h100_ndr", note="8 H100 a node on 'IB 400G' (8 x 400 Gb/s a node), NIC and fabric not stated: the library's "
                             "default DGX H100 + 8 x 400 Gb/s NDR; NCCL's choice")
       for n in (2, 4, 8)},
    "nccltests309-gjaion-8x8H100-allreduce-minctas24": CurveSetup(
        "dgx_h100_ndr", note="as the 8-node run; NCCL_MIN_CTAS=24, NCCL_IB_QPS_PER_CONNECTION=2 not applied: NCCL's choice"),
    "nccltests309-gjaion-2x8H100-allreduce-ring-minctas24": CurveSetup(
        "dgx_h100_ndr", "ring", note="NCCL_ALGO=Ring (applied); NCCL_MIN_CTAS=24, NCCL_IB_QPS_PER_CONNECTION=2 not applied"),
    # NVIDIA/nccl-tests#309, qoofyk's 4-node run (2025-05-23): 4 VMware VMs on the issue's Dell XE9680 class of server
    # (HGX H100, 8 x CX-7 400 Gb/s IB, one a GPU: the DGX H100 layout, as nccltests309-2x8H100-allreduce), mpirun -np 32,
    # -g 1, NCCL 2.26.2, a modified topology file (NCCL_TOPO_FILE=/mnt/nfs/vm_topo_mod.xml, not public; not modelled, as
    # any NCCL_TOPO_FILE: flowsolver/_nccl_env.py), no NCCL_ALGO / NCCL_PROTO: NCCL's choice
    "nccltests309-4x8H100-allreduce-vmware": CurveSetup(
        "dgx_h100_ndr", note="4 VMware VMs of HGX H100 + 8 x CX-7 400 Gb/s IB; their NCCL_TOPO_FILE not modelled: "
                             "NCCL's choice"),
    # terrificdm/p6b300-efa-deepep-nccl-testkit: mpirun -np 16 -N 8, -g 1, NCCL 2.31.2 with aws-ofi-nccl 1.21.1 as net
    # and tuner plugin (NCCL_TUNER_PLUGIN=ofi): the tuner is AWS's, not NCCL's; no NCCL_ALGO / NCCL_PROTO
    **{f"aws-p6b300-2x8B300-{op}": CurveSetup(
        "aws_p6_b300", note="2 x p6-b300, 16 x 400 Gb/s EFA a node; aws-ofi-nccl's tuner chose (not modelled): "
                            "NCCL's choice taken")
       for op in ("allreduce", "alltoall", "allgather", "reducescatter")},
    # boeschf/nccl-benchmark-on-alps-2025 (897cff4), the baseline configuration with aws-ofi-nccl 1.13.0: srun one task a
    # GPU (-g 1, select_gpu) on N nodes x 4 GH200, no NCCL_ALGO / NCCL_PROTO; no NVSwitch, so no NVLS: NCCL's choice among
    # ring / tree
    **{f"cscs-alps-uenv-{n}x4GH200-allreduce": CurveSetup(
        "cscs_alps_gh200_uenv", candidates=_NO_NVLS,
        note=f"{n} Alps GH200 node{'s' if n > 1 else ''} (uenv NCCL 2.23.4 + aws-ofi-nccl 1.13.0, all protocols): NCCL's "
             "choice without NVLS" + ("; dragonfly groups not modelled" if n >= 8 else ""))
       for n in (1, 2, 4, 8, 16, 32, 64, 128)},
    # thomaslie210/NCCL_Test_Results (83dd17d): {op}_perf -g 1 on 2 hosts of one A100-PCIE-40GB and one HDR HCA each
    # (NCCL 2.16.5, NCCL_NET_GDR_LEVEL=SYS), no NCCL_ALGO / NCCL_PROTO: NCCL's choice (one GPU a host: no NVLS; broadcast
    # by ring, the only algorithm NCCL 2.16 has for it)
    **{f"tl-2x1A100PCIe-hdr-{op}": CurveSetup(
        "a100_pcie_1hdr", note="2 hosts of 1 A100 PCIe + 1 HDR HCA on the CPU (PHB, GPUDirect RDMA forced): NCCL's choice")
       for op in ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast")},
    # NVIDIA/nccl-tests#232 (ProHuper, 2024-07-12): mpirun -np 2 (one rank a node, device 0, -g 1), NCCL_ALGO=Tree forced,
    # protocol NCCL's choice; 2 ranks on 2 nodes
    "nccltests232-2x1H100-roce-allreduce-tree": CurveSetup(
        "prohuper_h100_roce", "tree", note="NCCL_ALGO=Tree (the command); GPU0 and its PIX RoCE NIC on each of 2 nodes"),
    # NVIDIA/nccl#1411 (ProHuper): CUDA_VISIBLE_DEVICES=0,2,4,6 on 2 nodes, NCCL_CROSS_NIC=0; the command line is not in the
    # readable text; the issue is about "the bandwidth of ring allreduce": ring taken (an inference from the title)
    "nccl1411-2x4H100-roce-allreduce-ring-crossnic0": CurveSetup(
        "prohuper_h100_roce", "ring", note="ring from the issue's title (command not readable); GPUs 0,2,4,6 with their "
                                           "PIX NICs, NCCL_CROSS_NIC=0"),
}

#: curves the library cannot express faithfully where it matters: curve -> reason
NOT_MODELLED: dict[str, str] = {
    # none at present: CoreWeave's 20 NVL72 racks (1,440 ranks), whose tree candidate ran this
    # 22 GB machine out of memory until its steps were routed per distinct pair and solved in
    # groups (2026-12-06), is now modelled
}

#: curves the corpus README flags as not representative of the hardware: run and shown, but
#: kept out of every median. curve -> reason
EXCLUDED: dict[str, str] = {
    # dranet docs gke-rdma.md (the A4 2 x 8 all_gather log): times that no fabric gives, a demo on a
    # shared cluster rather than a measurement: a 234-328 us floor from 1 KiB to 128 KiB (16 GPUs on
    # 2 nodes), 2 MiB at 1,754 us where 4 MiB takes 934, 32 MiB faster than 16 MiB, 512 MiB barely
    # slower than 256 MiB, in-place and out-of-place up to 30 % apart (res21d)
    "dranet-gke-a4-2x8B200-allgather": "times no fabric gives (a 234-328 us floor to 128 KiB, 2 MiB 1,754 us "
                                       "against 4 MiB's 934, 32 MiB faster than 16 MiB): a demo on a shared "
                                       "cluster, not a measurement of the hardware",
    "cscs-alps-2x4GH200-allreduce-nocxi": "deliberately degraded configuration (Container Engine CXI hook "
                                          "disabled; corpus README caveats): not the hardware's performance",
    # dranet examples/demo_gke_rdma/nccl-gib-test.yaml: each pod takes "nvidia.com/gpu: 1" (whichever
    # GPU the device plugin gives: the log's "device 0 [0000:cc:00]" and "[0000:c4:00]", the 8th and
    # 5th GPU of the HGX baseboard in the A4 log's order 8f, 90, 96, 97, c4, c5, cb, cc) and the
    # fixed NIC 'ifName == "gpu1rdma0"', the 2nd GPU's. gIB's set_nccl_env.sh sets
    # NCCL_NET_GDR_LEVEL=PIX: GPUDirect RDMA only for a NIC on the GPU's own PCIe switch, so these
    # ranks stage the network through host memory (32 GB/s busbw of a 400 Gb/s NIC, a 21.8 us floor
    # where the PCIe-aligned B200 pods of nvidia-dranet.md reach 45 GB/s and 14.2 us)
    "dranet-gke-2x1H200-allgather": "the pods pair a GPU with another GPU's NIC ('ifName == \"gpu1rdma0\"', "
                                    "GPUs at cc:00 / c4:00): no GPUDirect RDMA under gIB's "
                                    "NCCL_NET_GDR_LEVEL=PIX, a host-staged path, not the hardware's",
    # mpi-operator.md: "nvidia.com/gpu: 1" per worker, NIC 'ifName == "gpu2rdma0"' (the 3rd GPU's),
    # ranks on "[0000:cc:00]" and "[0000:97:00]": rank 0's NIC is on another PCIe switch, as above
    "dranet-gke-2x1H200-allreduce-mpiop": "the workers pair a GPU with another GPU's NIC ('ifName == "
                                          "\"gpu2rdma0\"', GPUs at cc:00 / 97:00): no GPUDirect RDMA under "
                                          "gIB's NCCL_NET_GDR_LEVEL=PIX, a host-staged path, not the hardware's",
}

#: per-row algorithm where one curve holds rows run with different NCCL_ALGO (matched on env)
ROW_ALGORITHM = {
    ("mle-h200-4x8-p5en-4G-algos", "NCCL_ALGO=allreduce:ring"): "ring",
    ("mle-h200-4x8-p5en-4G-algos", "default (Ring chosen by AWS ofi tuner)"): "ring",
    ("mle-h200-4x8-p5en-4G-algos", "NCCL_ALGO=allreduce:nvlstree"): "nvls_tree",
}


def gpus_per_thread(env: str) -> int:
    """The GPUs one nccl-tests thread drove in a run, from its command line or notes (the
    corpus's ``env``): ``-g N`` (nccl-tests' ``nGpus``), else 1 (MPI / torchrun: a process
    per GPU, or not stated).

    nccl-tests' long form ``--ngpus N`` (or ``--ngpus=N``) is the same option.

    >>> gpus_per_thread("NCCL_ALGO=NVLS ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8 -n 40"), gpus_per_thread("")
    (8, 1)
    >>> gpus_per_thread("all_reduce_perf --ngpus 8 --minbytes 1k"), gpus_per_thread("x --ngpus=4")
    (8, 4)
    """
    found = re.search(r"(?:^|[\s(])(?:-g\s+|--ngpus[\s=]+)(\d+)", env)
    return int(found.group(1)) if found else 1


def host_overhead(env: str) -> float:
    """Seconds of host work each timed call of a run carries, from its command line or notes
    (the corpus's ``env``): PyTorch's per-call overhead for ``torch.distributed`` timed one call
    per trial from an idle device (ml-engineering's all_reduce_bench.py at 744d01e, the
    corpus's PyTorch curves: barrier, event, all_reduce, event, synchronise), else 0.

    >>> host_overhead("torch.distributed all_reduce (all_reduce_bench.py), torch 2.9.1"), host_overhead("-g 8")
    (2.5e-05, 0.0)
    """
    return TORCH_CALL_OVERHEAD if "torch.distributed" in env else 0.0


def curve_placement(setup: CurveSetup, nodes: int, gpus_per_node: int):
    """(graph, ranks) of a curve measured on ``nodes`` x ``gpus_per_node`` GPUs; ranks None
    means every GPU of the graph."""
    cluster = CLUSTERS[setup.cluster]
    m = cluster.gpus_per_server
    if setup.placement == "per_node":
        if gpus_per_node > m:
            raise ValueError(f"{gpus_per_node} GPUs per node on a {m}-GPU server")
        g = cluster.graph(nodes)
        if gpus_per_node == m and not setup.network_pair_first:
            return g, None
        ranks = [s * m + i for s in range(nodes) for i in range(gpus_per_node)]
        if setup.network_pair_first and nodes > 1:
            pair = [ranks[gpus_per_node - 1], ranks[gpus_per_node]]
            ranks = pair + [r for r in ranks if r not in pair]
        return g, ranks
    if setup.placement == "nvl72":
        trays_per_rack = nodes / setup.racks
        if trays_per_rack != int(trays_per_rack) or trays_per_rack * gpus_per_node > m:
            raise ValueError(f"{nodes} trays do not split evenly over {setup.racks} NVL72 racks")
        per_rack = int(trays_per_rack) * gpus_per_node
        g = cluster.graph(setup.racks)
        return g, [r * m + i for r in range(setup.racks) for i in range(per_rack)]
    raise ValueError(f"unknown placement {setup.placement!r}")


# --- training ------------------------------------------------------------------------------

def _spec(name, layers, hidden, ffn, heads, kv_heads, vocab, seq_len, gated=True, tied=False, experts=1, top_k=1):
    return dict(name=name, layers=layers, hidden=hidden, ffn=ffn, heads=heads, kv_heads=kv_heads, vocab=vocab,
                seq_len=seq_len, gated_mlp=gated, tied_embeddings=tied, experts=experts, top_k=top_k)


def _preset(name):
    m = get_model(name)
    return _spec(m.name, m.layers, m.hidden, m.ffn, m.heads, m.kv_heads, m.vocab, m.seq_len, m.gated_mlp,
                 m.tied_embeddings, m.experts, m.top_k)


#: published shapes of the corpus' models (corpus model name -> ModelSpec fields and source).
#: The corpus row's own shape columns, where filled, take precedence (training_call).
MODELS: dict[str, tuple[dict, str]] = {
    "llama-3.1-8b": (_preset("llama-3-8b"), "Llama 3.1 8B = Llama 3 8B shape (Llama 3 paper, table 3)"),
    "llama-3.1-70b": (_preset("llama-3-70b"), "Llama 3 paper, table 3"),
    "llama-3.1-405b": (_preset("llama-3-405b"), "Llama 3 paper, table 3 (8 KV heads)"),
    "llama3-8b": (_preset("llama-3-8b"), "Llama 3 paper, table 3"),
    "llama3-70b": (_preset("llama-3-70b"), "Llama 3 paper, table 3"),
    "llama-3-70b": (_preset("llama-3-70b"), "Llama 3 paper, table 3"),
    # Llama 2 paper (Touvron et al. 2023) table 1 / the released configs: SwiGLU, vocab 32,000,
    # context 4,096; 70B uses 8 KV heads (GQA)
    "llama2-7b": (_spec("llama2-7b", 32, 4096, 11008, 32, 32, 32000, 4096), "Llama 2 paper / HF config"),
    "llama2-13b": (_spec("llama2-13b", 40, 5120, 13824, 40, 40, 32000, 4096), "Llama 2 paper / HF config"),
    "llama2-70b": (_spec("llama2-70b", 80, 8192, 28672, 64, 8, 32000, 4096), "Llama 2 paper / HF config"),
    # GPT-3 shapes as NeMo runs them (NeMo-Framework-Launcher conf/training/gpt3/{5b,20b}.yaml):
    # FFN 4h (GELU, not gated), GPT-2 BPE vocabulary (50,257), embeddings shared, seq 2048
    "gpt3-5b": (_spec("gpt3-5b", 24, 4096, 16384, 32, 32, 50257, 2048, gated=False, tied=True),
                "NeMo-Framework-Launcher gpt3/5b.yaml"),
    "gpt3-20b": (_spec("gpt3-20b", 44, 6144, 24576, 48, 48, 50257, 2048, gated=False, tied=True),
                 "NeMo-Framework-Launcher gpt3/20b.yaml"),
    "gpt3-175b": (_preset("gpt-3-175b"), "GPT-3 paper table 2.1 (library preset)"),
    # Nemotron (NeMo nemo/collections/llm/gpt/model/nemotron.py; NeMo-Framework-Launcher
    # nemotron_22b.yaml): squared-ReLU MLP (not gated), untied embeddings, 256,000 vocabulary
    # (Nemotron-4 15B paper), seq 4096
    "nemotron-8b": (_spec("nemotron-8b", 32, 4096, 16384, 32, 32, 256000, 4096, gated=False),
                    "NeMo Nemotron3Config8B"),
    "nemotron-22b": (_spec("nemotron-22b", 40, 6144, 24576, 48, 48, 256000, 4096, gated=False),
                     "NeMo-Framework-Launcher nemotron_22b.yaml"),
    "nemotron4-15b": (_spec("nemotron4-15b", 32, 6144, 24576, 48, 8, 256000, 4096, gated=False),
                      "NeMo Nemotron4Config15B; Nemotron-4 15B paper"),
    "nemotron4-340b": (_spec("nemotron4-340b", 96, 18432, 73728, 96, 8, 256000, 4096, gated=False),
                       "NeMo Nemotron4Config340B; Nemotron-4 340B report"),
    "nemotron-340b": (_spec("nemotron-340b", 96, 18432, 73728, 96, 8, 256000, 4096, gated=False),
                      "NeMo Nemotron4Config340B"),
    # Grok-1 (xai-org/grok-1 README): 64 layers, 48 query / 8 KV heads, embedding 6,144, 8
    # experts with 2 per token, gated MLP; FFN 32,768 and vocabulary as the corpus row gives
    "grok-1-314b": (_spec("grok-1-314b", 64, 6144, 32768, 48, 8, 131072, 8192, experts=8, top_k=2),
                    "xai-org/grok-1 README (8 experts, top-2)"),
    # MPT (llm-foundry yamls, shapes in the corpus rows): GELU MLP 4h (not gated), ALiBi, tied
    # embeddings (MPT's wte is the output projection), vocab 50,368, seq 2048
    **{f"mpt-{s}": (_spec(f"mpt-{s}", 1, 64, 256, 1, 1, 50368, 2048, gated=False, tied=True),
                    "llm-foundry MPT yamls (shape columns of the corpus row)")
       for s in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")},
    # BLOOM (bigscience/bloom config): GELU MLP 4h (not gated), tied embeddings, ALiBi, 112
    # heads of 128; the proxies (chronicles-prequel, "48 node contenders") ran with 64 heads: the
    # page's "Final round comparison" says "all NHEADS=64 (above too)"
    "bloom-176b": (_spec("bloom-176b", 70, 14336, 4 * 14336, 112, 112, 250880, 2048, gated=False, tied=True),
                   "bigscience/bloom config.json"),
    "bloom-proxy-181B": (_spec("bloom-proxy-181B", 72, 14336, 4 * 14336, 64, 64, 250880, 2048, gated=False,
                               tied=True), "BLOOM chronicles-prequel (64 heads: 'all NHEADS=64 (above too)')"),
    "bloom-proxy-196B": (_spec("bloom-proxy-196B", 84, 13824, 4 * 13824, 64, 64, 250880, 2048, gated=False,
                               tied=True), "BLOOM chronicles-prequel (64 heads: 'all NHEADS=64 (above too)')"),
    "mixtral-8x7b": (_preset("mixtral-8x7b"), "library preset (Mistral's Mixtral-8x7B config)"),
    # InternLM-7B (InternLM/InternLM configs/7B_sft.py at 0047876: NUM_LAYER 32, HIDDEN_SIZE 4096, NUM_ATTENTION_HEAD
    # 32, MLP_RATIO 8 / 3, VOCAB_SIZE 103168, SEQ_LEN 2048, RMSNorm, SwiGLU): FFN 11008 (8/3 x 4096 rounded up to a
    # multiple of 256; InternLM-7B's config.json intermediate_size, from memory), MHA, untied embeddings
    # GPT-3 125M-2.7B as Dao-AILab/flash-attention's training configs build them (at 4a6eaa9, the commit that added the
    # README's speed table): transformers.GPT2Config through flash_attn.models.gpt.GPTLMHeadModel, so LayerNorm, a GELU
    # MLP of 4 x n_embd (GPT2Config n_inner None), learned position embeddings (not in ModelSpec: 2048 x n_embd
    # weights), tied input / output embeddings, vocabulary 50257 padded to a multiple of 8 (pad_vocab_size_multiple: 8)
    # = 50264; n_layer / n_embd / n_head from configs/model/gpt2model/gpt2-small.yaml (12 / 768 / 12), gpt2-medium.yaml
    # (24 / 1024 / 16) and configs/experiment/pile/gpt3l-flash.yaml (24 / 1536 / 16), gpt3xl-flash.yaml (24 / 2048 /
    # 16), gpt3-2.7B-flash-hdim128.yaml (32 / 2560 / 20: "Headdim 128 is faster than headdim 80")
    "gpt3-125m": (_spec("gpt3-125m", 12, 768, 4 * 768, 12, 12, 50264, 2048, gated=False, tied=True),
                  "flash-attention gpt2-small.yaml + GPT2Config defaults"),
    "gpt3-355m": (_spec("gpt3-355m", 24, 1024, 4 * 1024, 16, 16, 50264, 2048, gated=False, tied=True),
                  "flash-attention gpt2-medium.yaml + GPT2Config defaults"),
    "gpt3-760m": (_spec("gpt3-760m", 24, 1536, 4 * 1536, 16, 16, 50264, 2048, gated=False, tied=True),
                  "flash-attention gpt3l-flash.yaml + GPT2Config defaults"),
    "gpt3-1.3b": (_spec("gpt3-1.3b", 24, 2048, 4 * 2048, 16, 16, 50264, 2048, gated=False, tied=True),
                  "flash-attention gpt3xl-flash.yaml + GPT2Config defaults"),
    "gpt3-2.7b-hdim128": (_spec("gpt3-2.7b-hdim128", 32, 2560, 4 * 2560, 20, 20, 50264, 2048, gated=False, tied=True),
                          "flash-attention gpt3-2.7B-flash-hdim128.yaml + GPT2Config defaults"),
    "internlm-7b": (_spec("internlm-7b", 32, 4096, 11008, 32, 32, 103168, 2048),
                    "InternLM configs/7B_sft.py (FFN 11008 from 8/3 x 4096 rounded to 256)"),
    # Mistral's Mixtral-8x22B config.json (56 layers, hidden 6144, intermediate 16384, 48 query / 8
    # KV heads, vocabulary 32768, 8 experts top 2; res19 from memory, not re-read: listed as assumed)
    "mixtral-8x22b": (_spec("mixtral-8x22b", 56, 6144, 16384, 48, 8, 32768, 65536, experts=8, top_k=2),
                      "Mistral's Mixtral-8x22B config (8 experts, top-2; from memory)"),
    # Megatron-LM README GPTs (the rows give every shape column): FFN 4h with GELU (not gated);
    # the 2024 H100 table's parameter counts are 12 L h^2 + 2 V h (untied embeddings), the 2021
    # A100 table's 12 L h^2 + V h (tied)
    **{f"megatron-gpt-{s}": (_spec(f"megatron-gpt-{s}", 1, 64, 256, 1, 1, 131072, 4096, gated=False),
                             "the corpus row's shape columns (Megatron-LM README, 2024)")
       for s in ("1.7b", "7.1b", "16b", "32b", "70b", "119b", "177b", "314b", "462b")},
    **{f"megatron-gpt2021-{s}": (_spec(f"megatron-gpt2021-{s}", 1, 64, 256, 1, 1, 51200, 2048, gated=False,
                                       tied=True), "the corpus row's shape columns (Megatron-LM README, 2021)")
       for s in ("1.7b", "3.6b", "7.5b", "18b", "39b", "76b", "145b", "310b", "530b", "1t")},
}


@dataclass(frozen=True)
class TrainingSource:
    """Per source: which cluster (by the row's ``gpu`` text where a source has several) and
    the framework facts that hold for all its rows (``defaults``: training_step keywords)."""

    clusters: dict            # substring of the row's gpu -> CLUSTERS key ("" matches any)
    framework: str            # group label
    defaults: dict = field(default_factory=dict)
    note: str = ""


TRAINING_SOURCES: dict[str, TrainingSource] = {
    "nvidia-dgxc-benchmarking": TrainingSource(
        {"": "dgx_h100_ndr"}, "NeMo/Megatron",
        note="DGX H100 reference architecture (8 x 400G IB), the library's default cluster"),
    "nemo-perf-summary-24.07": TrainingSource(
        {"": "dgx_h100_ndr"}, "NeMo/Megatron", note="DGX-H100, fabric not stated: the DGX SuperPOD's NDR"),
    "oci-gpu-quickstarts": TrainingSource({"": "oci_bm_gpu_b200_8"}, "NeMo/Megatron"),
    # torchtitan: FSDP2 (full shard) everywhere; TP uses sequence parallelism; attention is
    # PyTorch SDPA with the flash (FlashAttention-2) backend on H100 (torchtitan
    # models/attention.py at 820504e: [FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH], cuDNN only on
    # B200; at 9dec370 a plain F.scaled_dot_product_attention); FSDP2 reduces in fp32
    # (config_manager.py: mixed_precision_reduce default "float32"); float8 linears from torchao
    # (tensorwise, its default recipe, unless the row says rowwise)
    "torchtitan": TrainingSource({"": "meta_grand_teton"}, "torchtitan",
                                 dict(zero=3, attention="fa2", reduce_dtype="fp32", power_cap=500.0),
                                 note="Grand Teton H100s at the default 500 W limit (torchtitan benchmarks)"),
    "trainy-whitefiber": TrainingSource({"": "whitefiber_h200"}, "torchtitan",
                                        dict(zero=3, attention="fa2", reduce_dtype="fp32", fp8_param_gather=True)),
    # llm-foundry: "our models use Flash Attention" (the benchmark README), FlashAttention-2 on
    # A100 / H100 in 2024
    "llm-foundry": TrainingSource({"h100": "mosaic_h100", "a100": "mosaic_a100_roce"}, "llm-foundry",
                                  dict(attention="fa2")),
    # Megatron-DeepSpeed of 2022 (BLOOM): full activation checkpointing (--checkpoint-activations,
    # the "hardware TFLOPs with activation recompute" of the log), no sequence parallelism, no
    # TP communication overlap and no flash attention (neither existed in that code base: the
    # scores go through Megatron's fused scale-mask-softmax)
    # Megatron-Bridge performance recipes (scripts/performance): Megatron-Core with Transformer
    # Engine (cuDNN fused attention), sequence parallelism with TP, TP communication overlap; the
    # page's "FSDP > 0" is Megatron FSDP (zero 3, set by the row), "FSDP = 0" DDP with the optimizer
    # sharding not printed (the library's default, zero 1, is taken and listed as assumed)
    "megatron-bridge-perf-summary": TrainingSource(
        {"gb200": "dgx_gb200_nvl72", "b200": "dgx_b200_ndr", "h100": "dgx_h100_ndr"}, "NeMo/Megatron",
        note="DGX systems as named on the page; fabric not stated: DGX SuperPOD NDR InfiniBand"),
    "nemo-perf-summary-25.04": TrainingSource(
        {"gb200": "dgx_gb200_nvl72"}, "NeMo/Megatron", note="DGX-GB200 NVL72, fabric between racks not stated"),
    "bigscience-bloom": TrainingSource(
        {"": "jean_zay_a100"}, "Megatron-DeepSpeed",
        dict(recompute="full", sequence_parallel=False, tp_overlap=0.0, attention="unfused")),
    # the held-out sources of res19 (session 19): Megatron-LM's README tables, NeMo's long-sequence
    # page, the NeMo 25.02 / 25.07 performance summaries and Meta's Llama 3 405B layouts
    "megatron-lm-readme-h100": TrainingSource(
        {"": "dgx_h100_ndr"}, "NeMo/Megatron",
        note="H100 cluster not named (NVIDIA's, up to 6144 GPUs): the library's default DGX H100 + NDR"),
    # Megatron-LM of April 2021: no sequence parallelism, no TP overlap, no flash attention (as
    # BLOOM's Megatron-DeepSpeed of 2022 above), full activation recompute (Narayanan et al. 2021
    # count its forward in their FLOPs: the runs recomputed)
    "megatron-lm-readme-a100-2021": TrainingSource(
        {"": "dgx_a100_hdr"}, "Megatron-LM 2021",
        dict(recompute="full", sequence_parallel=False, tp_overlap=0.0, attention="unfused"),
        note="Selene: DGX A100 SuperPOD with HDR InfiniBand (8 x 200 Gb/s a node)"),
    "nemo-long-sequence": TrainingSource(
        {"h100": "dgx_h100_ndr", "b200": "dgx_b200_ndr"}, "NeMo/Megatron",
        note="DGX-H100 / DGX-B200 as named on the page; fabric not stated: DGX SuperPOD NDR InfiniBand"),
    "nemo-docs-perf-summary-25.02": TrainingSource(
        {"b200": "dgx_b200_ndr"}, "NeMo/Megatron", note="DGX-B200, fabric not stated: DGX SuperPOD NDR"),
    "nemo-docs-perf-summary-25.07": TrainingSource(
        {"gb200": "dgx_gb200_nvl72"}, "NeMo/Megatron", note="DGX-GB200 NVL72, fabric between racks not stated"),
    # The Llama 3 Herd of Models, section 3.3.2 (the layouts' own paper; table 4 gives the rows): FSDP that shards
    # the optimizer and gradients but keeps the weights after the forward (ZeRO 2: "we do not reshard after forward
    # computation"), the interleaved 1F1B schedule, the first and last stages one layer short so that "the first
    # model chunk on the first stage has only the embedding" (a chunk is one layer: 8 virtual stages of 126 + 2
    # layers over PP 16), ranks ordered TP, CP, PP, DP from the fastest links; tests/training/
    # test_training_published.py runs the same layouts. Without them (vp 1, zero 1 until 2026-12-07) the rows
    # read +13.6 / +39.7 / +17.0 % slow: a 16-microbatch pipeline of 16 stages idle 15/16 of a step.
    "llama3-meta-sc24": TrainingSource(
        {"": "dgx_h100_ndr"}, "Meta (Llama 3)",
        dict(vp=8, zero=2, order="tp-cp-pp-dp"),
        note="Meta's 24K-GPU RoCE cluster (400 Gb/s a GPU): the closest catalogue cluster, DGX H100 + NDR 400G"),
    # InternLM's train_performance.md (held out, corpus21): the 7B on 8-1024 A100 with its Hybrid ZeRO; flash
    # attention (use_flash_attn=True in configs/7B_sft.py; Flash-Attention v1.0.5 in doc/en/install.md, run as the
    # library's fa2: no FlashAttention-1 table); sequence parallelism off and no TP communication overlap (the 7B
    # config's sequence_parallel=False; InternLM's TP of 2023 has no overlapped TP kernels: as Megatron-LM 2021)
    "internlm-train-performance": TrainingSource(
        {"": "internlm_a100_roce"}, "InternLM",
        dict(attention="fa2", sequence_parallel=False, tp_overlap=0.0),
        note="A100-SXM4-80GB nodes with 4 x 100 Gb/s RoCE (the page's hardware table)"),
    # Dao-AILab/flash-attention training/README.md 'Training speed' (held out, corpus22s): GPT-3 125M-2.7B on "one
    # node with 8 x A100 80GB SXM4 80GB (400W) with NVLink" (a DGX / HGX A100: the single-node cluster, whose NICs
    # carry nothing), data parallel only (Lightning DDP; the 760M-2.7B configs' DDPStrategyZero1 with
    # torch.distributed.optim.ZeroRedundancyOptimizer: zero 1, the rows' zero column), FlashAttention (flash-attn v0.2,
    # FlashAttention-1, Nov 2022: run as the library's fa2, as InternLM's v1.0.5; no FlashAttention-1 table), no
    # activation checkpointing ("we don't need any activation checkpointing"), no TP
    "flash-attention-training-readme": TrainingSource(
        {"": "dgx_a100_hdr"}, "flash-attention (PyTorch Lightning)",
        dict(attention="fa2"),
        note="one 8 x A100-SXM4-80GB node with NVLink (the README's 'Training speed')"),
}

#: Sources that publish TFLOP/s per GPU with their own FLOP count (validate.py turns the printed
#: figure into tokens/s per GPU with it, ``measured x 1e12 / flops_per_token(row)``, and compares
#: that with the model's tokens/s: the library's ``flops_per_token`` counts causal attention and no
#: recompute, which none of these did). source -> (FLOPs per token of a row, the formula's source).
#: L layers, h hidden, s sequence, V vocabulary, F FFN width, H heads, G KV heads.
def _megatron_2024_flops(r):
    # Megatron-LM num_floating_point_operations (megatron/training/training.py at f2e5db4, r0.8.0):
    # 12 L h^2 ((1 + G/H + s/h) + F/h + V / (2 L h)) per token (its MLP term for a GELU MLP, as these
    # GPTs have), attention not halved
    L, h, s, V, F, H, G = (int(r[k]) for k in ("layers", "hidden", "seq_len", "vocab", "ffn_hidden", "heads",
                                                "kv_heads"))
    return 12 * L * h * h * ((1 + G / H + s / h) + F / h + V / (2 * L * h))


def _narayanan_2021_flops(r):
    # Narayanan et al. 2021 (arXiv 2104.04473) eq. 3: 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)) per
    # iteration, i.e. per token 96 l h^2 (...): counts the recompute forward (96, not 72)
    L, h, s, V = (int(r[k]) for k in ("layers", "hidden", "seq_len", "vocab"))
    return 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))


def _nemo_2024_flops(r):
    # NeMo's model FLOPs before the causal discount (nemo/utils/flops_formulas.py; the discount came
    # in 6251117f4c, 2025-08-09), gated MLP: 12 L h^2 ((1 + G/H + s/h) + 1.5 F/h + V / (2 L h)) per
    # token (res19 checked tokens/s x this = the printed TFLOP/s on NeMo 24.07's Llama 2 7B and 25.04's
    # Llama 3 8B rows)
    spec = MODELS[r["model"]][0]
    L, h, F, H, G, V = (spec[k] for k in ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab"))
    s = int(r["seq_len"])
    return 12 * L * h * h * ((1 + G / H + s / h) + 1.5 * F / h + V / (2 * L * h))


TRAINING_FLOP_COUNTS = {
    "megatron-lm-readme-h100": (_megatron_2024_flops, "Megatron-LM r0.8.0 num_floating_point_operations "
                                                      "(training.py at f2e5db4): non-causal attention, no recompute"),
    "megatron-lm-readme-a100-2021": (_narayanan_2021_flops, "Narayanan et al. 2021 eq. 3 (recompute forward "
                                                            "counted, non-causal attention)"),
    "nemo-long-sequence": (_nemo_2024_flops, "NeMo's flops_formulas of the release (non-causal attention)"),
    "llama3-meta-sc24": (_nemo_2024_flops, "Meta's FLOP count is not stated: NeMo's non-causal count assumed"),
}

#: training rows not modelled: (source, row index in training.csv) -> reason; filled from the
#: rules below when the module loads
TRAINING_NOT_MODELLED: dict = {}

#: models whose shape ModelSpec cannot express (shapes from the models' published Hugging Face
#: config.json): corpus model -> reason
_SHAPE_NOT_EXPRESSIBLE = {
    "deepseek-v3": "DeepSeek-V3: multi-head latent attention (low-rank Q and KV, ranks 1536 / 512, decoupled RoPE), "
                   "1 shared + 256 routed experts (top 8) of width 2048 and 3 dense first layers (FFN 18432): "
                   "ModelSpec has GQA attention, one expert width, no shared expert and no dense layers",
    "gpt-oss-120b": "GPT-OSS 120B: 64 query heads of 64 (4096) on a hidden size of 2880, every other layer a "
                    "128-token sliding window, attention sinks: ModelSpec ties the head size to hidden / heads and "
                    "has full causal attention only",
    "qwen3-30b-a3b": "Qwen3-30B-A3B: 32 query heads of 128 (4096) on a hidden size of 2048: ModelSpec ties the head "
                     "size to hidden / heads (its attention would be half the model's)",
    "qwen3-235b-a22b": "Qwen3-235B-A22B: 64 query heads of 128 (8192) on a hidden size of 4096: ModelSpec ties the "
                       "head size to hidden / heads (its attention would be half the model's)",
}
_SHAPE_NOT_EXPRESSIBLE["qwen3-next-80b-a3b"] = (
    "Qwen3-Next-80B-A3B: 3 of every 4 layers Gated DeltaNet (linear attention), gated attention with 16 query heads "
    "of 256 on a hidden size of 2048, 512 experts (top 10) + 1 shared expert: ModelSpec has softmax attention only, "
    "its head size hidden / heads, no shared expert")
_SHAPE_NOT_EXPRESSIBLE["deepseek-v3-mtp"] = (_SHAPE_NOT_EXPRESSIBLE["deepseek-v3"]
                                             + "; the run also trains the multi-token-prediction module")


def _int(value):
    return None if value in ("", None) else int(float(value))


def _not_modelled_reason(row: dict):
    """Why a training.csv row cannot be expressed with the library, or None."""
    gpu = row.get("gpu", "").lower()
    if "gb300" in gpu or "b300" in gpu:
        return ("no GB300 / B300 (Blackwell Ultra) GPU in the catalogue: its FP8 / FP4 rates, 288 GB HBM3e and "
                "kernel tables are not the B200's / GB200's")
    if row.get("precision", "").lower().startswith("nvfp4"):
        return "NVFP4 (4-bit) GEMMs: the library's precisions are bf16 and fp8"
    if row.get("source") == "nemo-long-sequence" and _int(row.get("gpus")) == 4:
        return ("4 GPUs, half a DGX H100: the corpus' clusters are whole 8-GPU servers (training_step refuses "
                "a layout that does not fill the server)")
    batch = _batch_reason(row)
    if batch is not None:
        return batch
    return _SHAPE_NOT_EXPRESSIBLE.get(row.get("model"))


def _batch_reason(row: dict):
    """Why a row's printed global batch cannot be split into its data-parallel ranks' micro
    batches (``global_batch`` not a positive multiple of ``dp x micro_batch``, dp = GPUs / (tp pp
    cp)), or None."""
    gpus, gbs = _int(row.get("gpus")), _int(row.get("global_batch"))
    if gpus is None or gbs is None or row.get("source") == "torchtitan":     # torchtitan: a local batch
        return None
    prod = 1
    for key in ("tp", "pp", "cp"):
        prod *= _int(row.get(key)) or 1
    dp, mb = max(1, gpus // prod), _int(row.get("micro_batch")) or 1
    if gbs % (dp * mb) == 0:
        return None
    return (f"global batch {gbs} is not a positive multiple of dp x micro batch = {dp} x {mb} (dp = {gpus} GPUs / "
            f"(tp pp cp = {prod})): the printed layout cannot have run as printed")


def _load_not_modelled() -> None:
    import csv
    from pathlib import Path
    with open(Path(__file__).resolve().parent / "training.csv", newline="", encoding="utf-8") as f:
        for index, row in enumerate(csv.DictReader(f)):
            reason = _not_modelled_reason(row)
            if reason is not None:
                TRAINING_NOT_MODELLED[(row["source"], index)] = reason


_load_not_modelled()

#: training rows run and shown but kept out of the medians: predicate text -> reason
TRAINING_DUPLICATE_METRICS = {
    "tflops_per_gpu": "the same run as the step_time_s row beside it (TFLOP/s = FLOPs / step time, derived by "
                      "formula; the corpus README records derived columns once): shown, not counted twice",
}


def _framework(row, src: TrainingSource) -> str:
    fw = row.get("framework", "")
    if "MaxText" in fw:
        return "MaxText"
    return src.framework


#: the compute models the rows can be run with: the kernel tables (``compute_efficiency=None``,
#: the library's default on every corpus GPU) or the flat efficiency (DEFAULT_COMPUTE_EFFICIENCY)
COMPUTE_MODELS = ("kernels", "flat")


#: rows whose recipe sets the expert layers' TP degree (Megatron-Core's expert_tensor_parallel_size)
#: where the row itself does not print it: (source, model, GPU text) -> (etp, where it is set)
_RECIPE_ETP = {
    # NVIDIA/NeMo scripts/performance/recommended_model_configs/model_configs_b200.csv, from its first
    # version (81d94d15, 2025-02-19, the 25.02 era) to 8cfedd72 (2025-09-20): "pre_train,mixtral,8x22b,
    # b200,fp8,256,65536,2,4,8,(4,)8,14,1,64,1" -- tp 2 pp 4 cp 8 ep 8 vp 14 mbs 1 gbs 64, etp_size 1,
    # the row's layout (scripts/performance/utils.py passes it to strategy.expert_tensor_parallel_size).
    # The GB200 file never had a Mixtral 8x22B line (its etp is then None: Megatron's default, tp), so
    # nemo-perf-summary-25.04's GB200 row keeps etp = tp.
    ("nemo-docs-perf-summary-25.02", "mixtral-8x22b", "b200"):
        (1, "NeMo's B200 recipe (recommended_model_configs/model_configs_b200.csv): etp_size 1"),
}


def _expert_tp(row: dict):
    """``(etp, why)`` where a row's notes print ETP (the Megatron MoE Model Zoo's "ETP 1") or its
    recipe sets it (:data:`_RECIPE_ETP`), else None (Megatron-Core's default, tp)."""
    m = re.search(r"\bETP (\d+)\b", row.get("notes", ""))
    if m:
        return int(m.group(1)), f"ETP {m.group(1)} as printed"
    gpu = row.get("gpu", "").lower()
    for (source, model, gpu_key), value in _RECIPE_ETP.items():
        if row.get("source") == source and row.get("model") == model and gpu_key in gpu and "gb200" not in gpu:
            return value
    return None


def training_call(row: dict, compute: str = "kernels") -> tuple[str, dict, list[str]]:
    """(cluster name, training_step keyword arguments, assumptions) for one training.csv row
    (a dict of its columns as strings), with the kernel tables (``"kernels"``, the library's
    default) or the flat model (``"flat"``). Raises ``KeyError`` for an unmapped source."""
    if compute not in COMPUTE_MODELS:
        raise ValueError(f"compute must be one of {', '.join(COMPUTE_MODELS)}, got {compute!r}")
    src = TRAINING_SOURCES[row["source"]]
    gpu_text = row.get("gpu", "").lower()
    cluster = next(c for key, c in src.clusters.items() if key in gpu_text)
    cluster = _SMALL_RUN.get((cluster, _int(row["gpus"])), cluster)
    assumed: list[str] = []
    # the model: published shape, then the corpus row's own columns
    base, shape_source = MODELS[row["model"]]
    fields = dict(base)
    from_row = []
    for col, key in (("layers", "layers"), ("hidden", "hidden"), ("ffn_hidden", "ffn"), ("heads", "heads"),
                     ("kv_heads", "kv_heads"), ("vocab", "vocab"), ("seq_len", "seq_len"), ("experts", "experts"),
                     ("top_k", "top_k")):
        v = _int(row.get(col))
        if v is not None:
            fields[key] = v
            from_row.append(key)
    if row["model"].startswith("mpt-") and "ffn" not in from_row:
        fields["ffn"] = 4 * fields["hidden"]
    if row["model"].startswith("mpt-"):
        fields["kv_heads"] = fields["heads"] if "kv_heads" not in from_row else fields["kv_heads"]
    keys = ["layers", "hidden", "ffn", "heads", "kv_heads", "vocab"] + (["experts", "top_k"] if fields["experts"] > 1
                                                                        else [])
    missing = [k for k in keys if k not in from_row]
    if missing:
        assumed.append(f"shape {', '.join(missing)} from {shape_source}")
    spec = ModelSpec(**fields)
    gpus = _int(row["gpus"])
    prec = row["precision"].lower()
    kw = dict(model=spec, precision="fp8" if prec.startswith(("fp8", "mxfp8")) else "bf16")
    if prec.startswith("mxfp8"):
        # MXFP8 (Blackwell block scaling, 32-element blocks with E8M0 scales applied by the tensor
        # cores) runs the FP8 tensor-core rate; the casts are the library's Transformer Engine
        # FP8 recipe's -- an assumption: the library has no MXFP8 recipe
        assumed.append("MXFP8 as the library's fp8 (Transformer Engine recipe)")
    kw.update(src.defaults)
    tp_, pp, cp, ep, vp = (_int(row.get(k)) for k in ("tp", "pp", "cp", "ep", "vp"))
    dp = _int(row.get("dp"))
    for key, value in (("tp", tp_), ("pp", pp), ("cp", cp), ("ep", ep), ("vp", vp)):
        if value is None:
            if key in ("tp", "pp") and row["source"] not in ("llm-foundry",) and "MaxText" not in row["framework"]:
                assumed.append(f"{key} not stated: 1")
        else:
            kw[key] = value
    prod = kw.get("tp", 1) * kw.get("pp", 1) * kw.get("cp", 1)
    if dp is None or dp * prod != gpus:
        if dp is not None:
            assumed.append(f"dp {dp} x tp x pp x cp != {gpus} GPUs: dp = {gpus // prod} (GPUs / (tp pp cp))")
        dp = gpus // prod
    kw["dp"] = dp
    expert_tp = _expert_tp(row) if fields["experts"] > 1 else None
    if expert_tp is not None and (expert_tp[0] == 1 or expert_tp[0] == kw.get("tp", 1)):
        kw["etp"] = expert_tp[0]
        if expert_tp[0] != kw.get("tp", 1):
            assumed.append(f"expert TP {expert_tp[0]}: {expert_tp[1]}")
    mb = _int(row.get("micro_batch")) or 1
    gbs = _int(row.get("global_batch"))
    if gbs is not None and row["source"] != "torchtitan" and gbs % (dp * mb) != 0:
        raise ValueError(f"global_batch {gbs} of the row is not a positive multiple of dp x micro_batch = "
                         f"{dp} x {mb}: the row cannot be mapped as printed")
    fw = row.get("framework", "")
    notes = row.get("notes", "")
    # zero / FSDP
    zero = _int(row.get("zero"))
    if "MaxText" in fw:
        kw["zero"] = 3       # "FSDP=128 + DP (MaxText)" per the row's note
        assumed.append("MaxText FSDP (the note): zero 3, tp 1, pp 1")
    elif zero is not None:
        kw["zero"] = zero
    elif "zero" not in kw:
        assumed.append("optimizer sharding not stated: zero 1 (distributed optimizer, the library default)")
    # the batch
    if kw.get("pp", 1) > 1 and row["source"] in ("torchtitan",):
        # torchtitan splits a rank's local batch into one microbatch per pipeline stage
        # (pipeline_parallel_microbatches default = stages) -> microbatch = local / pp
        local = mb
        per = local // kw["pp"] if local % kw["pp"] == 0 else 1
        kw["micro_batch"] = per
        kw["global_batch"] = gbs if gbs is not None else dp * local
        assumed.append(f"torchtitan PP: local batch {local} in {local // per} microbatches of {per} (default: one "
                       "per stage)")
    else:
        kw["micro_batch"] = mb
        if gbs is None:
            gbs = dp * mb
            assumed.append(f"global batch not stated: dp x micro batch = {gbs} (no gradient accumulation)")
        kw["global_batch"] = gbs
    # activation recompute from the row's note / framework
    text = (notes + " " + fw).lower()
    if "activation checkpointing true" in text or "full ac" in text:
        kw["recompute"] = "full"
    elif "activation checkpointing false" in text:
        kw["recompute"] = "none"
    elif "selective activation checkpointing" in text or "per-op sac" in text:
        # torchtitan's "selective" is its per-op policy (selective_ac_option = "op", the default
        # of its Llama 3 8B recipe at both the 2024-12 and the 2025-06 commits)
        kw["recompute"] = "selective_op" if row["source"] in ("torchtitan", "trainy-whitefiber") else "selective"
    elif "MaxText" in fw:
        # the recipe's remat_policy (NVIDIA/dgxc-benchmarking 1b9bb6b maxtext/configure.sh: POLICY="save_qkv_proj")
        kw["recompute"] = "save_qkv_proj"
    elif row["source"] == "trainy-whitefiber":
        kw["recompute"] = "selective_op"
        assumed.append("recompute not printed: llama3_8b.toml's default, torchtitan's per-op selective checkpointing")
    elif "recompute" not in kw and ("nemo" in fw.lower() or "megatron" in fw.lower()):
        # not stated: Megatron-Core's default (TransformerConfig.recompute_granularity None, no
        # recompute) where the layout fits without it, else selective (the recipe must have
        # recomputed to run): settled below, once the rest of the layout is known
        kw["recompute"] = _LEAST_RECOMPUTE
    elif "recompute" not in kw:
        assumed.append("recompute not stated: library default (none, Megatron-Core's)")
    # torchtitan: TP without AsyncTP does not overlap its collectives
    last = fw.split(";")[-1].strip().lower()
    if row["source"] == "torchtitan" and kw.get("tp", 1) > 1 and last in ("vanilla tp", "2d"):
        kw["tp_overlap"] = 0.0
        assumed.append("vanilla TP (no AsyncTP): TP collectives not overlapped (tp_overlap 0)")
    if row["source"] == "torchtitan" and "vp not stated" in notes:
        assumed.append("interleaved schedule's stages per rank not stated: vp 1")
    if row["source"] == "torchtitan" and kw.get("tp", 1) > 1 and "asynctp" in (notes + " " + fw).lower().replace(" ", ""):
        kw["tp_overlap_impl"] = "async"          # PyTorch async TP: chunked GEMMs, no SMs held
    if kw.get("precision") == "fp8" and row["source"] in ("torchtitan", "trainy-whitefiber"):
        kw["fp8_recipe"] = "rowwise" if "rowwise" in row["precision"].lower() else "tensorwise"
    if row["seq_len"] in ("", None):
        assumed.append(f"seq_len not stated: the model's {spec.seq_len}")
    c = CLUSTERS[cluster]
    if c.train_gpu is not None:
        kw["gpu"] = c.train_gpu
    if "a100_40gb" in gpu_text.replace(" ", "_").replace("-", "_"):
        kw["gpu"] = A100_40GB
    kw["compute_efficiency"] = None if compute == "kernels" else DEFAULT_COMPUTE_EFFICIENCY
    if compute == "flat":
        kw.pop("fp8_recipe", None)          # a kernel-table setting: the flat model refuses it
    if kw.get("recompute") == _LEAST_RECOMPUTE:
        kw["recompute"] = "none"
        memory, capacity = _memory_of(kw, cluster)
        if memory > capacity:
            kw["recompute"] = "selective"
        assumed.append(f"recompute not stated: {kw['recompute']}, the least that fits the GPU (Megatron-Core's "
                       f"default is none; {memory / 1e9:.1f} GB without it of {capacity / 1e9:.1f})")
    return cluster, kw, assumed


#: a row's recompute not stated, to be settled by memory (training_call)
_LEAST_RECOMPUTE = "least that fits"


def training_framework(row: dict) -> str:
    return _framework(row, TRAINING_SOURCES[row["source"]])


def servers_for(cluster: str, gpus: int) -> int:
    m = CLUSTERS[cluster].gpus_per_server
    return max(1, math.ceil(gpus / m))


#: device memory as NVML reports it for the "80 GB" parts (benchmarks/validation/memory.csv cites
#: it: H100 SXM 81,559 MiB, A100 80GB 81,920 MiB), the capacity the published runs had; other
#: GPUs at their GpuSpec's memory (NVML's for B200 and GB200 too)
NVML_MEMORY = {"h100_sxm": 81559 * 2 ** 20, "a100_sxm": 81920 * 2 ** 20}


def _memory_not_modelled_reason(row: dict):
    """Why a modelled training row's layout is not checked against its GPU's memory, or None."""
    if (row.get("source") == "megatron-bridge-perf-summary" and row.get("model") == "llama3-70b"
            and "gb200" in row.get("gpu", "").lower() and row.get("zero") == "3" and row.get("micro_batch") == "2"):
        # NVIDIA-NeMo/Megatron-Bridge 067f987 src/megatron/bridge/perf_recipes/llama/gb200/llama3.py,
        # llama3_70b_pretrain_64gpu_gb200_fp8cs_config: cpu_offloading = True,
        # cpu_offloading_weights = False, cpu_offloading_num_layers = 40 (the 25.11 starter pack,
        # 97ad8cc, sets the same offload in its workload base configs)
        return ("the recipe offloads 40 of the 80 layers' activations to host memory (Megatron's "
                "cpu_offloading_num_layers): the memory model keeps every layer's on the GPU")
    if (row.get("source") in ("megatron-bridge-perf-summary", "nemo-docs-perf-summary-25.07")
            and row.get("model") == "llama-3.1-405b" and "gb200" in row.get("gpu", "").lower()
            and row.get("zero") == "3"):
        # NVIDIA-NeMo/Megatron-Bridge 3d277f6 scripts/performance/configs/llama/
        # llama31_workload_base_configs.py, LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V1: TP 2,
        # use_megatron_fsdp=True, cpu_offloading_num_layers=92 (NeMo 25.07's row prints the same
        # layout; its own recipe not read)
        return ("the recipe offloads 92 of the 126 layers' activations to host memory (Megatron's "
                "cpu_offloading_num_layers): the memory model keeps every layer's on the GPU")
    if (row.get("source") == "megatron-bridge-perf-summary" and row.get("model") == "llama3-70b"
            and "gb200" in row.get("gpu", "").lower() and row.get("precision") == "MXFP8"
            and row.get("micro_batch") == "2"):
        # the 25.09 table prints one MBS cell (2) for the plain figure (FSDP, whose recipe sets
        # micro_batch_size=2) and the parenthesised one; Megatron-Bridge 3dafb00
        # scripts/performance/configs/llama/llama3_workload_base_configs.py,
        # LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_MX_V1 (TP 2, PP 4, VP 5) sets no micro batch, and the
        # later releases print MBS 1 for this layout
        return ("the printed micro batch 2 is the plain figure's (FSDP recipe); the block-scaled TP 2 PP 4 VP 5 "
                "recipe sets none and later releases print 1: at 2 the layout does not fit in the model")
    # other Megatron-Bridge recipes offload fewer layers (the GB200 70B bf16 recipe 20, the B200 70B
    # FP8 one 5; perf_recipes/llama/{gb200,b200}/llama3.py at 067f987): their rows fit without it,
    # so the check, which counts every layer on the GPU, is the stricter one for them
    return None


def layout_memory(row: dict):
    """``(memory per GPU in the model, the GPU's memory, training_step keyword arguments)``
    in bytes for one training.csv row run on whole servers, or None when the row is not
    mapped, not modelled (``_not_modelled_reason``), its memory not expressible
    (``_memory_not_modelled_reason``: activations offloaded to the host) or not on whole servers.
    The model's estimate counts states and activations (``memory_per_gpu``'s defaults) with the
    run's attention kernel and, for an FP8 run on Transformer Engine, its one-byte GEMM inputs."""
    if _not_modelled_reason(row) is not None or _memory_not_modelled_reason(row) is not None:
        return None
    try:
        cluster, kw, _ = training_call(row)
    except (KeyError, StopIteration, ValueError):
        return None
    c = CLUSTERS[cluster]
    gpus = int(row["gpus"])
    if servers_for(cluster, gpus) * c.gpus_per_server != gpus:
        return None
    return (*_memory_of(kw, cluster), kw)


def _memory_of(kw: dict, cluster: str) -> tuple:
    """(memory per GPU in the model, the GPU's memory as NVML reports it), bytes, of a layout
    (its attention kernel as training_step times it: flash, ``"auto"``, where the row sets none)."""
    memory = memory_per_gpu(kw["model"], tp=kw.get("tp", 1), pp=kw.get("pp", 1), dp=kw["dp"], ep=kw.get("ep", 1),
                            etp=kw.get("etp"),
                            zero=kw.get("zero", 1), micro_batch=kw.get("micro_batch", 1),
                            microbatches=kw["global_batch"] // (kw["dp"] * kw.get("micro_batch", 1)),
                            cp=kw.get("cp", 1), vp=kw.get("vp", 1), recompute=kw.get("recompute", "none"),
                            attention=kw.get("attention", "auto"), recompute_layers=kw.get("recompute_layers"),
                            **({"sequence_parallel": kw["sequence_parallel"]} if "sequence_parallel" in kw else {}),
                            fp8_activations=te_fp8_activations(kw.get("precision", "bf16"), kw.get("fp8_recipe", "te")))
    gpu = kw["gpu"] if "gpu" in kw else tp.get_gpu(CLUSTERS[cluster].server.gpu)
    return memory, NVML_MEMORY.get(gpu.name, gpu.memory)
