"""kind_floors floors an all-to-all at Simple whatever the job's protocol, as concurrent_kinds
runs it (NCCL's sends take no NCCL_PROTO): under protocol LL or LL128 it was refused."""

import pytest

import topologies as tp
from flowsolver.collectives import concurrent_kinds, kind_floors


@pytest.mark.parametrize("protocol", ["LL", "LL128"])
def test_all_to_all_floor_under_a_job_protocol_is_simple_and_below_the_time(protocol):
    g = tp.rail_optimized(2)
    group = list(range(16))
    floors = kind_floors(g, "all_to_all", 2 ** 24, group, protocol=protocol)
    assert floors == kind_floors(g, "all_to_all", 2 ** 24, group, protocol="Simple")
    assert all(proto == "Simple" for _, proto in floors)
    (timed,) = concurrent_kinds(g, [[dict(op="all_to_all", size=2 ** 24, ranks=group)]], protocol=protocol)
    assert min(floors.values()) <= timed.makespan * (1 + 1e-12)
