"""The ``"nvlink_mesh"`` server layout: GPUs joined pairwise by NVLink, no NVSwitch.

Every pair of GPUs has one full-duplex edge (tier ``"nvlink"``, technology ``nvlink``, attribute
``cables`` the link count) of ``links_per_pair`` NVLinks, each at one link's rate: the GPU's
aggregate NVLink rate (the ``nvlink`` technology) over its NVLink count (:data:`NVLINKS_PER_GPU`).
Traffic between two GPUs takes their own edge (GPUs are never transit nodes), so a ring through
the GPUs of a server is as fast as the pairs it uses: the collectives spread their rings over
every pair as NCCL's search does (:mod:`flowsolver.collectives`).

Link counts of the machines that use it (``links_per_pair``):

* HGX A100 4-GPU (ALCF Polaris, HPE Apollo 6500 Gen10+): 4 NVLink 3 a pair, ``NV4`` between every
  pair in the device-affinity table of ALCF's Polaris machine overview (argonne-lcf/user-guides at
  0a867f3, docs/polaris/hardware-overview/machine-overview.md); 3 pairs x 4 = the A100's 12 links.
* 4 x H100 SXM (HGX H100 4-GPU) and 4 x GH200 (HPE Cray EX254n, CSCS Alps): no public board
  description read here gives the count. 6 a pair is the H100's 18 NVLink 4 split evenly over its
  3 peers; SURF Snellius' NCCL log (odissei-benchmarks/nccl-tests runs/1node) agrees: "16 p2p
  channels per peer" is NCCL's ``2 x links`` rounded up to a power of two (5 to 8 links), and its
  24 ring channels are what NCCL's search finds with 5 or 6 (tests/collectives/test_mesh.py). No
  default: the parameter is required.
"""

from __future__ import annotations

import networkx as nx

from ._graph import add_cable, check_int
from .links import get_link

__all__ = ["NVLINKS_PER_GPU", "MAX_MESH_GPUS", "mesh_link", "check_mesh", "build_mesh"]

#: NVLinks of one GPU, by the catalogue's aggregate technology (the datasheets quoted in links.py:
#: A100 12 x NVLink 3, H100 / H200 / GH200 18 x NVLink 4, B200 18 x NVLink 5)
NVLINKS_PER_GPU = {"nvlink3": 12, "nvlink4": 18, "nvlink5": 18}
#: the most GPUs of a mesh: every GPU needs ``gpus - 1`` peers' links (4 NVLink 3 a pair on an A100
#: leave none for a fifth GPU); larger NVLink machines without NVSwitch (DGX-1's hybrid cube mesh)
#: are not complete graphs: read them from an NCCL topology file (topologies.from_nccl_xml)
MAX_MESH_GPUS = 4


def mesh_link(nvlink) -> float:
    """Bytes/s of one NVLink of ``nvlink``'s GPU (one direction): the aggregate over the link count.

    >>> mesh_link("nvlink3") / 1e9, mesh_link("nvlink4") / 1e9
    (25.0, 25.0)
    """
    tech = get_link(nvlink)
    per_gpu = NVLINKS_PER_GPU.get(tech.name)
    if per_gpu is None:
        raise ValueError(f"nvlink must be one of {', '.join(NVLINKS_PER_GPU)} for layout 'nvlink_mesh' "
                         f"(its link count a GPU is known), got {tech.name!r}")
    return tech.bandwidth / per_gpu


def check_mesh(name: str, gpus: int, nvlink, links_per_pair: int) -> None:
    """Raise ValueError unless ``gpus`` GPUs of ``nvlink`` can be joined pairwise by
    ``links_per_pair`` links each."""
    if nvlink is None:
        raise ValueError(f"server {name!r}: layout 'nvlink_mesh' needs nvlink (the GPU's NVLink technology)")
    check_int("links_per_pair", links_per_pair, 1, "NVLinks between each pair of GPUs; required for 'nvlink_mesh'")
    if not 2 <= gpus <= MAX_MESH_GPUS:
        raise ValueError(f"server {name!r}: layout 'nvlink_mesh' joins 2 to {MAX_MESH_GPUS} GPUs pairwise, got "
                         f"gpus={gpus} (a larger NVLink machine without NVSwitch: from_nccl_xml)")
    per_gpu = NVLINKS_PER_GPU.get(get_link(nvlink).name)
    if per_gpu is not None and links_per_pair * (gpus - 1) > per_gpu:
        raise ValueError(f"server {name!r}: links_per_pair={links_per_pair} to {gpus - 1} peers needs "
                         f"{links_per_pair * (gpus - 1)} NVLinks a GPU; a {get_link(nvlink).name} GPU has {per_gpu}")
    mesh_link(nvlink)


def build_mesh(g: nx.DiGraph, gpus: list, nvlink, links_per_pair: int) -> None:
    """Join every pair of ``gpus`` (node ids) by an edge of ``links_per_pair`` NVLinks, both ways."""
    # the edge names the generation's technology (as an NCCL topology file's NVLink cables do):
    # NCCL's view of it (its efficiency) and the NVLink path class are read from that name
    tech, per_link = get_link(nvlink), mesh_link(nvlink)
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            add_cable(g, a, b, tech, tier="nvlink", cables=links_per_pair, bandwidth=per_link)
