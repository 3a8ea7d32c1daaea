"""Cluster hardware as graphs: link catalogue, server models, fabric generators.

Every generator returns a ``networkx.DiGraph`` in which a full-duplex cable is two directed
edges. Node attribute ``kind`` is one of ``"gpu"``, ``"nic"``, ``"nvswitch"``,
``"pcie_switch"``, ``"cpu"``, ``"switch"``, ``"storage"``; switches also carry ``role`` and
``tier``. Edge attributes: ``capacity`` (bytes/s, one direction), ``latency`` (s),
``tech`` (catalogue name), ``tier`` (layer name) and ``cables`` (parallel cables merged
into the edge); a NIC technology with a transport of its own also writes ``transport``. Graph attributes record the generator and its parameters.

Families are registered by name (:func:`register_family`; :func:`build` and the command line
read the registry); machine-description files of every known format are read by :func:`read`
(``formats/``: node-link JSON, NCCL topology XML, ASTRA-sim and SimAI files;
:func:`register_reader` adds one).

This package knows nothing of JAX or routing.

>>> import topologies as tp
>>> g = tp.rail_optimized(nodes=8, server="dgx_h100", link="ib_ndr")
>>> len(tp.gpus(g))
64
"""

from ._graph import SERVER_TIERS, check_ratio, fingerprint, uplinks_for  # noqa: F401 (for flowsolver, not in __all__)
from ._validate import TopologyError, validate, validate_edited  # noqa: F401 (validate_edited: likewise)
from .analysis import bisection_max_flow, describe, format_description, gpus
from .bill import Bill, BillLine, bill, price_tally, tally
from .parts import Part, get_part, largest_switch, part_names, register_part, unregister_part
from .build import FAMILIES, Family, FamilyParameter, build, get_family, register_family
from .clos import fat_tree, leaf_spine, rail_optimized, rail_optimized_limit
from .dragonfly import dragonfly, dragonfly_plus, global_link_partner
from .failures import degrade_links, fabric_cables, fail_links, tier_cables
from .formats import (NcclServer, from_astra_network, from_nccl_xml, from_simai, load, parse_simple_yaml, read,
                      reader_names, register_reader, save, to_simai)
from .links import GB, Gbit, LinkTech, get_link, link_names, register_link
from .gpu_types import GpuSpec, get_gpu
from .servers import ServerModel, ServerPorts, get_server, register_server, server_names
from .planes import multi_plane
from .presets import meta_24k, nvl72_cluster
from .rail_only import rail_only
from .storage import add_storage
from .torus import torus
from .transports import DEFAULT_TRANSPORT, Transport, get_transport, register_transport, transport_names

__all__ = [
    "GB", "Gbit", "LinkTech", "get_link", "link_names", "register_link",
    "GpuSpec", "ServerModel", "ServerPorts", "get_gpu", "get_server", "register_server",
    "server_names",
    "fat_tree", "leaf_spine", "rail_optimized", "dragonfly", "global_link_partner", "torus",
    "add_storage", "fail_links", "fabric_cables", "tier_cables", "degrade_links", "build", "FAMILIES",
    "Family", "FamilyParameter", "register_family", "get_family",
    "gpus", "describe", "format_description", "validate", "save", "load",
    "bisection_max_flow", "TopologyError",
    "from_nccl_xml", "NcclServer", "from_astra_network", "parse_simple_yaml",
    "from_simai", "to_simai", "read", "register_reader", "reader_names",
    "default_cluster",
    "bill", "Bill", "BillLine", "Part", "get_part", "largest_switch", "part_names", "register_part", "unregister_part",
    "rail_optimized_limit",
    "tally", "price_tally", "rail_only", "multi_plane", "dragonfly_plus", "meta_24k", "nvl72_cluster",
    "Transport", "get_transport", "register_transport", "transport_names", "DEFAULT_TRANSPORT",
]


def default_cluster():
    """The built-in default cluster: 8 DGX H100 servers (64 GPUs) on a rail-optimised
    InfiniBand NDR fabric - the article's 8 nodes x 8 H100.

    >>> describe(default_cluster())["gpus"]
    64
    """
    return rail_optimized(nodes=8, server="dgx_h100", link="ib_ndr")
