"""Bad input to the cluster generators: a ValueError naming the parameter and what it allows."""

import pytest

import topologies as tp


@pytest.mark.parametrize("call,match", [
    (lambda: tp.fat_tree(5), r"k must be even"),
    (lambda: tp.fat_tree(2), r"k must be an integer >= 4"),
    (lambda: tp.fat_tree(4.0), r"k must be an integer"),
    (lambda: tp.fat_tree(-4), r"k must be an integer >= 4"),
    (lambda: tp.fat_tree(4, link="ndr"), r"link: unknown link technology 'ndr'.*ib_ndr"),
    (lambda: tp.fat_tree(4, server="dgx"), r"unknown server 'dgx'.*dgx_h100"),
    (lambda: tp.leaf_spine(0, 2, 8), r"leaves must be an integer >= 1"),
    (lambda: tp.leaf_spine(2, 0, 8), r"spines must be >= 1 with 2 leaves"),
    (lambda: tp.leaf_spine(2, 2, -1), r"hosts_per_leaf must be an integer >= 1"),
    (lambda: tp.leaf_spine(2, 2, 8, oversubscription=0.5), r"oversubscription must be .*>= 1"),
    (lambda: tp.leaf_spine(2, 2, 8, oversubscription=True), r"oversubscription must be a number"),   # not 1
    (lambda: tp.rail_optimized(2, oversubscription="2"), r"oversubscription must be a number"),
    (lambda: tp.rail_optimized(0), r"nodes must be an integer >= 1"),
    (lambda: tp.rail_optimized(4, oversubscription=float("nan")), r"oversubscription"),
    (lambda: tp.rail_optimized(4, link="ib_qdr"), r"link: unknown link technology"),
    (lambda: tp.dragonfly(0, 4, 2), r"p must be an integer >= 1"),
    (lambda: tp.dragonfly(2, 4, 2, g=10), r"g must be between 2 and a\*h \+ 1 = 9"),
    (lambda: tp.dragonfly(2, 4, 2, g=4), r"g - 1 must divide a\*h = 8.*allowed g: \[2, 3, 5, 9\]"),
    (lambda: tp.dragonfly(2, 4, 2, arrangement="random"), r"arrangement must be one of"),
    (lambda: tp.torus((4, 1)), r"dims must be .*integers >= 2"),
    (lambda: tp.torus((0, 4)), r"dims must be"),
    (lambda: tp.torus(()), r"dims must be"),
    (lambda: tp.torus(4), r"dims must be a sequence"),
    (lambda: tp.torus([2.9, 3.7]), r"dims must be a sequence of integers >= 2, got \[2.9, 3.7\]"),  # not 2 x 3
    (lambda: tp.torus("44"), r"dims must be a sequence of integers >= 2, got '44'"),          # not (4, 4)
    (lambda: tp.torus([True, 4]), r"dims must be a sequence"),
    (lambda: tp.add_storage(tp.torus((3, 3)), network="compute"), r"needs a switched compute fabric"),
    (lambda: tp.add_storage(tp.fat_tree(4), network="san"), r"network must be one of"),
    (lambda: tp.add_storage(tp.fat_tree(4), 0), r"count must be an integer >= 1"),
    # sizes whose graph would not fit in memory are refused before anything is built (fat_tree(400):
    # 16 M hosts and three tiers of 16 M cables, each both ways)
    (lambda: tp.fat_tree(400), r"fat_tree with k = 400 would build about"),
    (lambda: tp.torus((100000, 100000)), r"torus with dims \(100000, 100000\) would build about"),
    (lambda: tp.torus((128, 128, 128), server="dgx_h100"), r"torus with dims \(128, 128, 128\) would build"),
    (lambda: tp.dragonfly(100, 200, 100), r"dragonfly with p = 100, a = 200, h = 100, g = 20001 would build"),
    (lambda: tp.leaf_spine(100000, 10, 1000), r"leaf_spine with 100000 leaves x 1000 hosts"),
    (lambda: tp.rail_only(262144, radix=1024), r"rail_only with 262144 nodes would build"),
    # an invalid g with a*h = 10^8 global ports: the size is refused first (the allowed g were
    # listed by 10^8 trial divisions first: 4.9 s; 10^10 never finished)
    (lambda: tp.dragonfly(1, 10**4, 10**4, g=4), r"dragonfly with p = 1, a = 10000, h = 10000, g = 4 would build"),
    (lambda: tp.dragonfly(1, 10**5, 10**5, g=4), r"dragonfly with p = 1, a = 100000, h = 100000, g = 4 would"),
    (lambda: tp.dragonfly_plus(1, 10**4, 1, 10**4, groups=4), r"dragonfly_plus with .* 4 groups would build"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("build, module", [
    (lambda: tp.fat_tree(8), "clos"), (lambda: tp.fat_tree(8, server="dgx_h100"), "clos"),
    (lambda: tp.leaf_spine(8, 4, 32, server="dgx_h100"), "clos"),
    (lambda: tp.leaf_spine(4, 2, 8, oversubscription=2), "clos"),
    (lambda: tp.torus((4, 3, 3)), "torus"), (lambda: tp.torus((3, 3), server="dgx_h100"), "torus"),
    (lambda: tp.dragonfly(2, 4, 2), "dragonfly"), (lambda: tp.dragonfly(8, 4, 2, server="dgx_h100"), "dragonfly"),
    (lambda: tp.dragonfly_plus(4, 4, 8, 2, server="dgx_h100"), "dragonfly"),
    # servers fill the ports of all the leaves together: 4 ports a leaf, 8 NICs a server
    (lambda: tp.leaf_spine(6, 1, 4, server="dgx_h100"), "clos"),
    (lambda: tp.leaf_spine(3, 1, 12, server="dgx_h100"), "clos"),
    (lambda: tp.dragonfly_plus(1, 1, 4, 1, server="dgx_h100"), "dragonfly"),
])
def test_the_size_limit_counts_what_the_generator_builds(build, module, monkeypatch):
    # the estimate checked before building is the built graph's nodes plus directed edges
    import sys

    counted = []
    mod = sys.modules[f"topologies.{module}"]
    real = mod.check_scale
    monkeypatch.setattr(mod, "check_scale",
                        lambda family, parts, sizes: counted.append(parts) or real(family, parts, sizes))
    g = build()
    assert counted == [g.number_of_nodes() + g.number_of_edges()]


def test_failures_twice_are_all_listed_and_a_cable_is_degraded_once():
    g = tp.fat_tree(8)
    h = tp.fail_links(tp.fail_links(g, 0.02, seed=1), 0.02, seed=2)
    at_zero = {frozenset((u, v)) for u, v, d in h.edges(data=True) if d["capacity"] == 0}
    # the second call's list replaced the first's: cables at 0 that no list named
    assert {frozenset(c) for c in h.graph["failed"]} == at_zero and len(at_zero) > 5
    u, v = tp.tier_cables(g, "edge-agg")[0]
    with pytest.raises(ValueError, match="given twice"):       # both directions: 0.5 x 0.5 = 0.25 before
        tp.degrade_links(g, [(u, v), (v, u)], 0.5)


def test_a_fabric_too_small_for_one_server_is_an_error():
    # fat_tree(4)'s 16 host ports hold no 72-NIC NVL72 rack: a graph of 0 GPUs was built
    with pytest.raises(ValueError, match="16 endpoint ports hold no nvl72 server"):
        tp.fat_tree(4, server="nvl72")


def test_a_saved_failed_graph_fails_more_links_after_loading(tmp_path):
    # a loaded graph's failed cables are lists: fail_links raised "unhashable type: 'list'"
    path = tmp_path / "f.json"
    tp.save(tp.fail_links(tp.fat_tree(4), 0.1, seed=3), path)
    h = tp.fail_links(tp.load(path), 0.1, seed=5)
    at_zero = {frozenset((u, v)) for u, v, d in h.edges(data=True) if d["capacity"] == 0}
    assert {frozenset(c) for c in h.graph["failed"]} == at_zero


def test_failing_a_fraction_of_a_fabric_without_switch_cables_is_an_error():
    # rail_only within one switch a rail and a GPU torus have no switch-to-switch cables:
    # --fail-fraction 1 gave the healthy cluster's numbers, unsaid
    for g in (tp.rail_only(8), tp.torus((4, 4))):
        with pytest.raises(ValueError, match="no switch-to-switch cables to fail"):
            tp.fail_links(g, 0.5)
        assert tp.fail_links(g, 0.0).graph.get("failed") == []


def test_a_dragonfly_of_an_odd_group_count_has_its_bisection_from_a_max_flow():
    # dragonfly(2, 2, 2): 5 groups; the formula cut 2 groups against 3 (300 GB/s) where the
    # balanced cut {g0, g1, half of g2} holds 4 global and 1 local cable: 250 GB/s
    for g, want in ((tp.dragonfly(2, 2, 2), 5 * tp.get_link("ib_ndr").bandwidth), (tp.dragonfly(2, 4, 2), None)):
        d = tp.describe(g)
        assert d["bisection_method"].startswith("max flow between the server halves")
        if want is not None:
            assert d["bisection_bandwidth"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("server", [None, "dgx_h100"])
def test_a_degraded_torus_never_gains_bisection(server):
    # its formula cuts the longest dimension, the rank halves the first: an edited torus was
    # measured across the rank halves, and one cable at half its rate raised 200 GB/s to 350
    g = tp.torus((2, 4)) if server is None else tp.torus((2, 4), server=server)
    before = tp.describe(g)["bisection_bandwidth"]
    for cable in tp.tier_cables(g, "torus")[:3]:
        after = tp.describe(tp.degrade_links(g, [cable], 0.5))["bisection_bandwidth"]
        assert after <= before * (1 + 1e-12)


def test_build_refuses_what_the_family_would_drop():
    # unknown size keywords and an oversubscription for a non-blocking family were dropped, unseen
    with pytest.raises(ValueError, match="family 'fat_tree' takes k, not kk"):
        tp.build("fat_tree", k=4, kk=5)
    with pytest.raises(ValueError, match="oversubscription: family 'fat_tree' is built non-blocking only"):
        tp.build("fat_tree", k=4, oversubscription=3)
    assert len(tp.gpus(tp.build("fat_tree", k=4))) == 16


def test_failures_name_their_own_parameters():
    # build() said 'fraction' (fail_links' name), and a negative seed was NumPy's 'expected
    # non-negative integer', naming nothing
    with pytest.raises(ValueError, match=r"^fail_fraction must be in \[0, 1\], got 2$"):
        tp.build("rail_optimized", nodes=2, fail_fraction=2)
    for call in (lambda: tp.build("rail_optimized", nodes=2, fail_fraction=0.1, seed=-1),
                 lambda: tp.fail_links(tp.fat_tree(4), 0.1, seed=-1)):
        with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
            call()
    with pytest.raises(ValueError, match=r"^fraction must be in \[0, 1\], got 2$"):
        tp.fail_links(tp.fat_tree(4), 2)


def test_the_allowed_group_counts_are_every_divisor_plus_one():
    # a*h = 10^6 = 2^6 5^6 global ports a group: g - 1 must be one of its 7 x 7 = 49 divisors
    allowed = sorted(2**i * 5**j + 1 for i in range(7) for j in range(7))
    with pytest.raises(ValueError, match=r"allowed g: \[" + ", ".join(map(str, allowed)) + r"\], got 4"):
        tp.dragonfly(1, 1, 10**6, g=4)
    with pytest.raises(ValueError, match=r"allowed groups: \[2, 3, 5, 6, 11, 21\], got 4"):   # 20: 1 2 4 5 10 20
        tp.dragonfly_plus(2, 4, 2, 5, groups=4)
