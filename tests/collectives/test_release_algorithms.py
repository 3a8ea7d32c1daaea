"""Which algorithms an NCCL release has at all (``nccl_version=``), from NCCL's source at its
release tags: NVLS from 2.17 (``#define NCCL_ALGO_NVLS 4``, v2.17.1-1 src/include/devcomm.h:23;
v2.16.5-1 has Tree, Ring and CollNet only, ``NCCL_NUM_ALGORITHMS 4``), for all-gather and
reduce-scatter too in 2.17 (tuning.cc:143-144), left out of 2.18's tuner for both
(v2.18.1-1 tuning.cc:159-160) and back from 2.19 (v2.19.1-1:168-169); NVLSTree from 2.18
(v2.18.1-1 devcomm.h:24); PAT from 2.23 (v2.23.4-1 src/include/nccl_common.h:61)."""

import pytest

import topologies as tp
from flowsolver import collective
from flowsolver.collectives._nccl_model import Hardware, enabled

GIB = 1 << 30


def _algorithms(result) -> set:
    return {key.split("/")[0] for key in result.estimates}


@pytest.fixture(scope="module")
def dgx():
    return tp.rail_optimized(1)             # one DGX H100: NVSwitch with NVLink SHARP


@pytest.mark.parametrize("version, has_nvls", [("2.16", False), ("2.16.5-1", False), ("2.17", True),
                                               ("2.18.3-1", True), ("2.19", True), (None, True)])
def test_nvls_all_reduce_is_there_from_2_17(dgx, version, has_nvls):
    r = collective(dgx, "all_reduce", GIB, nccl_version=version)
    assert ("nvls" in _algorithms(r)) is has_nvls
    if not has_nvls:
        assert r.algorithm != "nvls" and _algorithms(r) <= {"ring", "tree"}


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("version, has_nvls", [("2.16", False), ("2.17", True), ("2.18", False),
                                               ("2.18.6-1", False), ("2.19.1-1", True), ("2.22", True)])
def test_nvls_all_gather_and_reduce_scatter_skip_2_18(dgx, op, version, has_nvls):
    assert ("nvls" in _algorithms(collective(dgx, op, 64 << 20, nccl_version=version))) is has_nvls


@pytest.mark.parametrize("version, has_tree", [("2.17.1-1", False), ("2.18.1-1", True), (None, True)])
def test_nvls_tree_is_there_from_2_18(version, has_tree):
    r = collective(tp.rail_optimized(2), "all_reduce", GIB, nccl_version=version)
    assert ("nvls_tree" in _algorithms(r)) is has_tree
    assert "nvls" not in _algorithms(r)                 # NVLS itself: one node only (no IB SHARP here)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_pat_is_there_from_2_23(op):
    g, ranks = tp.rail_optimized(8), [8 * i for i in range(8)]        # one GPU on each of 8 nodes
    assert "pat" not in _algorithms(collective(g, op, 1 << 20, ranks=ranks, nccl_version="2.22.3-1"))
    assert "pat" in _algorithms(collective(g, op, 1 << 20, ranks=ranks, nccl_version="2.23.4-1"))


@pytest.mark.parametrize("algorithm, op, nodes, version, first", [
    ("nvls", "all_reduce", 1, "2.16.2-1", "2.17"), ("nvls", "reduce_scatter", 1, "2.16", "2.17"),
    ("nvls_tree", "all_reduce", 2, "2.17.1-1", "2.18")])
def test_forcing_an_algorithm_the_release_lacks_names_nccl_version_and_its_first_release(algorithm, op, nodes,
                                                                                          version, first):
    major_minor = ".".join(version.split("-")[0].split(".")[:2])
    with pytest.raises(ValueError, match=rf"nccl_version {major_minor}\b.*first in NCCL {first}\b"):
        collective(tp.rail_optimized(nodes), op, GIB, algorithm=algorithm, nccl_version=version)


def test_forcing_nvls_all_gather_under_2_18_says_2_18_runs_it_for_all_reduce_only(dgx):
    with pytest.raises(ValueError, match=r"nccl_version 2\.18\b.*all-reduce only"):
        collective(dgx, "all_gather", GIB, algorithm="nvls", nccl_version="2.18.5")
    with pytest.raises(ValueError, match=r"nccl_version 2\.22\b.*first in NCCL 2\.23"):
        collective(tp.rail_optimized(4), "all_gather", GIB, ranks=[0, 8, 16, 24], algorithm="pat",
                   nccl_version="2.22")


def test_enabled_gates_by_release_and_none_is_the_newest():
    hw = Hardware(8, 1, "hopper", nvls=True)
    assert [enabled("nvls", "Simple", "all_reduce", hw, nccl=v) for v in ((2, 16), (2, 17), None)] == \
        [False, True, True]
    assert [enabled("nvls", "Simple", "all_gather", hw, nccl=v) for v in ((2, 17), (2, 18), (2, 19))] == \
        [True, False, True]
    pat = Hardware(4, 4, "hopper")
    assert [enabled("pat", "Simple", "all_gather", pat, nccl=v) for v in ((2, 22), (2, 23), None)] == \
        [False, True, True]
    # the ring and the tree are in every 2.x release
    assert enabled("ring", "Simple", "all_gather", pat, nccl=(2, 4)) and \
        enabled("tree", "Simple", "all_reduce", Hardware(16, 2, "ampere"), nccl=(2, 4))


def test_the_page_prints_what_the_model_chooses(dgx):
    from pathlib import Path
    page = (Path(__file__).resolve().parents[2] / "docs" / "collective-timing.md").read_text()
    chosen = [collective(dgx, "all_reduce", 2 ** 30, nccl_version=v).algorithm for v in (None, "2.16")]
    assert chosen == ["nvls", "ring"]
    assert f"nccl_version=release).algorithm)   # {chosen[0]}, then {chosen[1]}" in page
