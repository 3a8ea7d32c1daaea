"""Exact sensitivities of rates, makespans, collective and step times to link capacities
(flowsolver.solver._sensitivity, timing/_completion_sensitivity, collectives/_sensitivity,
training/_sensitivity, upgrade): every derivative is checked against finite differences of
independent re-solves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import flowsolver as fs
import topologies as tp
from flowsolver import completion_sensitivity, completion_times, fair_rates, max_min_fair, rate_sensitivity

INF = np.inf


def _random(seed, L=8, N=12, integer=False):
    """A random instance: ECMP-like fractions, weights and some caps (integer values: ties)."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((L, N))
    for f in range(N):
        k = rng.integers(1, 4)
        dense[rng.choice(L, k, replace=False), f] = 1.0 if integer else rng.choice([1.0, 0.5, 0.25], k)
    if integer:
        cap = rng.integers(1, 4, L).astype(float) * 2
        w = rng.choice([1.0, 2.0], N)
        d = np.where(rng.random(N) < 0.3, rng.integers(1, 3, N).astype(float), INF)
    else:
        cap, w = rng.uniform(1, 10, L), rng.uniform(0.5, 2, N)
        d = np.where(rng.random(N) < 0.3, rng.uniform(0.1, 3, N), INF)
    return sp.csc_matrix(dense), cap, w, d


def _rates(A, cap, w, d, method="auto"):
    return max_min_fair(A, cap, weights=w, demands=d, method=method).rates


def _central(rates_of, x, i):
    """Central difference of ``rates_of(x)`` in ``x[i]``, step 1e-6 of it."""
    h = 1e-6 * x[i]
    up, down = x.copy(), x.copy()
    up[i] += h
    down[i] -= h
    return (rates_of(up) - rates_of(down)) / (2 * h)


@pytest.mark.parametrize("method", ["dense", "frontier"])
def test_rates_match_central_differences_away_from_ties(method):
    checked = 0
    for seed in range(4):
        A, cap, w, d = _random(seed)
        a = max_min_fair(A, cap, weights=w, demands=d, method=method)
        sens = rate_sensitivity(A, a, cap, weights=w, demands=d)
        assert not sens.one_sided_links.any() and not sens.one_sided_caps.any()
        J = sens.capacity_jacobian().toarray()
        Jd = sens.demand_jacobian().toarray()
        for l in range(A.shape[0]):
            fd = _central(lambda c: _rates(A, c, w, d, method), cap, l)
            np.testing.assert_allclose(J[:, l], fd, rtol=1e-6, atol=1e-9)
        for f in np.flatnonzero(np.isfinite(d)):
            fd = _central(lambda dd: _rates(A, cap, w, dd, method), d, f)
            np.testing.assert_allclose(Jd[:, f], fd, rtol=1e-6, atol=1e-9)
        g = np.random.default_rng(seed).normal(size=A.shape[1])
        gc, gd = sens.gradient(g)
        np.testing.assert_allclose(gc, g @ J, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gd, g @ Jd, rtol=1e-12, atol=1e-12)
        checked += 1
    assert checked == 4


def test_a_tie_gives_both_one_sided_derivatives_and_refuses_a_two_sided_one():
    # two links of 2, flow 0 on both, flows 1 and 2 on one each: every flow at 1, flow 0 tied
    A = sp.csc_matrix([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    cap = np.array([2.0, 2.0])
    sens = rate_sensitivity(A, max_min_fair(A, cap), cap)
    assert sens.one_sided_links.tolist() == [True, True]
    with pytest.raises(ValueError, match="side"):
        sens.capacity_jacobian()
    # more on link 0 alone: link 1 still holds flow 0 at 1, flow 1 takes all of it
    assert sens.capacity_jacobian("up").toarray()[:, 0].tolist() == [0.0, 1.0, 0.0]
    # less on link 0: flows 0 and 1 share the loss; link 1 gives flow 2 what flow 0 frees
    assert sens.capacity_jacobian("down").toarray()[:, 0].tolist() == [0.5, 0.5, -0.5]
    # both links up together: every flow gains half (the directional derivative, not the sum
    # of the one-link sides, which would give flow 0 nothing)
    np.testing.assert_allclose(sens.directional([1.0, 1.0]), [0.5, 0.5, 0.5])


def test_one_sided_derivatives_match_one_sided_differences_at_ties():
    tied = 0
    for seed in range(16):
        A, cap, w, d = _random(seed, L=6, N=9, integer=True)
        method = "dense" if seed % 2 else "frontier"
        a = max_min_fair(A, cap, weights=w, demands=d, method=method)
        sens = rate_sensitivity(A, a, cap, weights=w, demands=d)
        tied += bool(sens.one_sided_links.any() or sens.one_sided_caps.any())
        for side, sign in (("up", 1.0), ("down", -1.0)):
            J = sens.capacity_jacobian(side).toarray()
            for l in range(A.shape[0]):
                h = sign * 1e-6 * cap[l]
                c2 = cap.copy()
                c2[l] += h
                np.testing.assert_allclose(J[:, l], (_rates(A, c2, w, d, method) - a.rates) / h, rtol=1e-6, atol=1e-7)
            Jd = sens.demand_jacobian(side).toarray()
            for f in np.flatnonzero(np.isfinite(d)):
                h = sign * 1e-6 * d[f]
                d2 = d.copy()
                d2[f] += h
                np.testing.assert_allclose(Jd[:, f], (_rates(A, cap, w, d2, method) - a.rates) / h, rtol=1e-6,
                                           atol=1e-7)
        for sign in (1.0, -1.0):                # every link at once, both ways
            fd = (_rates(A, cap + sign * 1e-6, w, d, method) - a.rates) / (sign * 1e-6)
            got = sens.directional(np.ones(6)) if sign > 0 else -sens.directional(-np.ones(6))
            np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    assert tied >= 2                            # the integer instances do tie


def test_a_batch_gives_one_sensitivity_per_scenario():
    A, cap, w, d = _random(3)
    caps = np.stack([cap, cap * 2])
    batch = rate_sensitivity(A, max_min_fair(A, caps, weights=w, demands=d), caps, weights=w, demands=d)
    for row, sens in zip(caps, batch):
        alone = rate_sensitivity(A, max_min_fair(A, row, weights=w, demands=d), row, weights=w, demands=d)
        np.testing.assert_allclose(sens.capacity_jacobian().toarray(), alone.capacity_jacobian().toarray(),
                                   rtol=1e-9, atol=1e-12)


def test_jax_grad_of_total_throughput_is_the_sum_of_the_rate_derivatives():
    A, cap, w, d = _random(5)
    a = max_min_fair(A, cap, weights=w, demands=d)
    sens = rate_sensitivity(A, a, cap, weights=w, demands=d)
    J, Jd = sens.capacity_jacobian().toarray(), sens.demand_jacobian().toarray()
    with jax.enable_x64(True):
        c, dj = jnp.asarray(cap), jnp.asarray(d)
        gc, gd = jax.grad(lambda c, dj: fair_rates(A, c, dj, weights=w).sum(), argnums=(0, 1))(c, dj)
        np.testing.assert_allclose(gc, J.sum(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.where(np.isfinite(d), gd, 0.0), Jd.sum(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jax.jacfwd(lambda c: fair_rates(A, c, dj, weights=w))(c), J, atol=1e-12)
        _, tangent = jax.jvp(lambda c: fair_rates(A, c, dj, weights=w), (c,), (jnp.ones(len(cap)),))
        np.testing.assert_allclose(tangent, J.sum(axis=1), atol=1e-12)
        with pytest.raises(TypeError, match="outside jax.jit"):
            jax.jit(lambda c: fair_rates(A, c, dj, weights=w))(c)


def test_makespan_derivatives_through_the_events_match_differences():
    for seed in range(6):
        rng = np.random.default_rng(seed)
        dense = np.zeros((5, 7))
        for f in range(7):
            dense[rng.choice(5, rng.integers(1, 3), replace=False), f] = 1.0
        A, cap, sizes, w = sp.csc_matrix(dense), rng.uniform(1, 4, 5), rng.uniform(1, 5, 7), rng.uniform(0.5, 2, 7)
        cs = completion_sensitivity(A, sizes, cap, weights=w)
        T = float(completion_times(A, sizes, cap, weights=w).makespan)
        assert cs.makespan == pytest.approx(T, rel=1e-9)
        for side, sign in (("up", 1.0), ("down", -1.0)):
            grad = cs.gradient(side)
            for l in range(5):
                c2 = cap.copy()
                c2[l] += sign * 1e-6 * cap[l]
                fd = (float(completion_times(A, sizes, c2, weights=w).makespan) - T) / (sign * 1e-6 * cap[l])
                assert grad[l] == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_makespan_when_the_flows_finishing_last_would_end_apart():
    # link 0 (1 B/s) holds flow 0 at 1; link 1 (3 B/s) gives flow 1 the other 2: both end at 1 s
    A = sp.csc_matrix([[1.0, 0.0], [1.0, 1.0]])
    cap, sizes = np.array([1.0, 3.0]), np.array([1.0, 2.0])
    cs = completion_sensitivity(A, sizes, cap)
    # more on link 0: flow 0 ends first, then flow 1 has link 1 to itself and still ends at 1 s
    # (the later end at the old rates alone would say +0.5)
    assert cs.gradient("up")[0] == pytest.approx(0.0, abs=1e-12)
    # less on link 1 (by h): flow 1 has h bytes left at 1 s, then all of link 1: T = 1 + h / 3
    assert cs.gradient("down")[1] == pytest.approx(-1.0 / 3.0, rel=1e-12)
    # less on link 0: flow 1 ends at 1 - h/2, flow 0 has 1.5 h left at 1 - h: T = 1 + h
    assert cs.gradient("down")[0] == pytest.approx(-1.0, rel=1e-12)
    assert cs.one_sided().all()


def test_makespan_when_flows_finishing_before_the_last_event_end_apart():
    # link 0 (2 B/s): flows 0 and 2 at 1 each; link 1 (1 B/s): flow 1 at 1. Flows 0 and 1 (1 B)
    # end together at 1 s; flow 2 (3 B) then has link 0 alone: T = 1 + 2 / 2 = 2 s
    A = sp.csc_matrix([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    cap, sizes = np.array([2.0, 1.0]), np.array([1.0, 1.0, 3.0])
    cs = completion_sensitivity(A, sizes, cap)
    assert cs.makespan == pytest.approx(2.0, rel=1e-12)
    # h more on link 0: flows 0 and 2 run at 1 + h/2, flow 0 ends at 1 / (1 + h/2), and flow 2
    # has its 2 B left on link 0 alone from then on, while flow 1 still runs:
    # T = 1 / (1 + h/2) + 2 / (2 + h) = 4 / (2 + h), dT/dh = -1 (flow 2 keeping its rate until
    # the event, the old rule, would give -0.75); h less: flow 1 ends first and moves nothing
    # on link 0, T = 4 / (2 - h): -1 again
    assert cs.gradient("up")[0] == pytest.approx(-1.0, rel=1e-12)
    assert cs.gradient("down")[0] == pytest.approx(-1.0, rel=1e-12)
    # link 1 carries only flow 1, which ends before the makespan either way
    assert cs.gradient("up")[1] == 0.0 and cs.gradient("down")[1] == 0.0
    # both links up by h: flow 1 ends at 1 - h, flow 0 at 1 - h/2, flow 2 as above
    assert cs.directional(np.array([1.0, 1.0]), "up") == pytest.approx(-1.0, rel=1e-12)
    assert cs.one_sided()[0]


def test_makespan_derivatives_at_ties_match_one_sided_differences():
    """Integer instances: ties and flows finishing together everywhere. Every derivative
    (flows finishing together that a change moves apart included: the new event order is
    followed) equals the one-sided difference of independent re-solves
    (Richardson-extrapolated: a piece may be curved, the makespan being a sum of capacity
    ratios)."""
    for seed in range(24):
        rng = np.random.default_rng(seed)
        dense = np.zeros((6, 9))
        for f in range(9):
            dense[rng.choice(6, rng.integers(1, 4), replace=False), f] = rng.choice([1.0, 0.5], 1)
        A, cap, sizes = sp.csc_matrix(dense), rng.integers(1, 4, 6) * 2.0, rng.integers(1, 4, 9).astype(float)
        _match_one_sided_differences(A, sizes, cap, seed)


def _match_one_sided_differences(A, sizes, cap, label):
    """Every link's makespan derivative, both sides, against the one-sided difference of
    independent re-solves (Richardson-extrapolated: a piece may be curved, the makespan
    being a sum of capacity ratios)."""
    T = float(completion_times(A, sizes, cap).makespan)
    cs = completion_sensitivity(A, sizes, cap)
    for side, sign in (("up", 1.0), ("down", -1.0)):
        grad = cs.gradient(side)
        assert np.isfinite(grad).all()
        for l in range(len(cap)):
            fd = []
            for h in (sign * 1e-6 * cap[l], sign * 5e-7 * cap[l]):
                c2 = cap.copy()
                c2[l] += h
                fd.append((float(completion_times(A, sizes, c2).makespan) - T) / h)
            assert grad[l] == pytest.approx(2 * fd[1] - fd[0], rel=1e-5, abs=1e-6 * T / cap[l]), (label, side, l)


def _many_ending_together(seed):
    """5 links of 6 or 12 B/s, 12 flows on one or two links each, of 1 or 2 B: many flows
    end together and one-link changes split them."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((5, 12))
    for f in range(12):
        dense[rng.choice(5, rng.integers(1, 3), replace=False), f] = 1.0
    cap = rng.integers(1, 3, 5) * 6.0
    return sp.csc_matrix(dense), rng.integers(1, 3, 12).astype(float), cap


def test_makespan_where_flows_ending_apart_move_others_in_several_steps(monkeypatch):
    """Integer instances with many flows finishing together, where a one-link change splits
    them into several ends and the flows left change rates at each (the split's own
    event-driven run, several solves): every derivative equals the one-sided difference of
    independent re-solves."""
    from flowsolver.timing import _event_split

    solved_sets = []
    run = _event_split.EventSplit._split

    def counted(self, tau, tol):
        out = run(self, tau, tol)
        solved_sets.append(len(self._known))
        return out

    monkeypatch.setattr(_event_split.EventSplit, "_split", counted)
    for seed in range(100, 125):
        _match_one_sided_differences(*_many_ending_together(seed), seed)
    assert len(solved_sets) >= 15 and max(solved_sets) >= 4    # split runs of several steps were followed


def test_event_splits_in_small_pieces_give_the_same_derivatives(monkeypatch):
    """Bounded memory (one direction per split run, one solve per batch, the kept solutions
    dropped as they come) changes no value."""
    from flowsolver.timing import _event_split

    cases = [_many_ending_together(seed) for seed in range(100, 112)]
    whole = [(completion_sensitivity(A, n, c).gradient("up"), completion_sensitivity(A, n, c).gradient("down"))
             for A, n, c in cases]
    runs = []
    split = _event_split.EventSplit._split
    monkeypatch.setattr(_event_split.EventSplit, "_split", lambda self, *a: runs.append(1) or split(self, *a))
    monkeypatch.setattr(_event_split, "SPLIT_ENTRIES", 1)
    for (A, n, c), (up, down) in zip(cases, whole):
        cs = completion_sensitivity(A, n, c)
        np.testing.assert_allclose(cs.gradient("up"), up, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(cs.gradient("down"), down, rtol=1e-12, atol=1e-15)
    assert len(runs) >= 10                  # the split's own runs were among them


def _tier_changed(graph, tier, added, key="tier"):
    """A copy with ``added`` bytes/s on every link whose ``key`` (an edge attribute, or
    "cable": "tier/tech") is ``tier``."""
    g = graph.copy()
    for *_, data in g.edges(data=True):
        if (f"{data['tier']}/{data['tech']}" if key == "cable" else data[key]) == tier:
            data["capacity"] += added
    return g


def test_nonblocking_fat_tree_all_to_all_core_links_zero_nics_carry_it_all():
    g = tp.fat_tree(4)
    r = fs.collective(g, "all_to_all", 2**26)
    df = r.sensitivity()
    per_link = df[df.group_by == "link"]
    assert (per_link.saved_s_per_GBps == 0.0).all()     # each NIC alone: its twin at the far end still holds
    tiers = df[df.group_by == "tier"].set_index("group").saved_s_per_GBps
    assert tiers["agg-core"] == 0.0 and tiers["edge-agg"] == 0.0 and tiers["pcie"] == 0.0
    h = 1e6                                             # bytes/s on every access link
    again = fs.collective(_tier_changed(g, "access", h), "all_to_all", 2**26, algorithm=r.algorithm)
    assert tiers["access"] == pytest.approx((r.time - again.time) / h * 1e9, rel=1e-4)
    assert tiers["access"] > 0
    down = r.sensitivity("down")                        # each NIC alone taken down does slow its flows
    lost = fs.collective(_tier_changed(g, "access", -h), "all_to_all", 2**26, algorithm=r.algorithm).time - r.time
    assert down[(down.group_by == "tier") & (down.group == "access")].saved_s_per_GBps.iloc[0] == pytest.approx(
        lost / h * 1e9, rel=1e-4)
    nic = down[(down.group_by == "link") & (down.tier == "access")].saved_s_per_GBps
    assert (nic > 0).all()


def test_technology_and_cable_group_rows_match_re_solves():
    g = fs.Upgrade("agg-core", factor=0.25).apply(tp.fat_tree(4))     # core-bound
    r = fs.collective(g, "all_to_all", 2**24, algorithm="direct")
    table = r.sensitivity().set_index(["group_by", "group"]).saved_s_per_GBps
    h = 1e6                                             # bytes/s on every link of the group
    for group_by, group, key in (("tech", "ib_ndr", "tech"), ("cable_group", "agg-core/ib_ndr", "cable"),
                                 ("cable_group", "access/ib_ndr", "cable")):
        again = fs.collective(_tier_changed(g, group, h, key=key), "all_to_all", 2**24, algorithm="direct")
        assert table[group_by, group] == pytest.approx((r.time - again.time) / h * 1e9, rel=1e-4, abs=1e-12)
    assert table["cable_group", "agg-core/ib_ndr"] > 0 and table["cable_group", "access/ib_ndr"] == 0.0


def test_step_sensitivity_matches_a_re_solved_step():
    g = tp.rail_optimized(2)
    r = fs.training_step(g, model="llama-3-8b", tp=8, global_batch=16)
    tiers = r.sensitivity()
    tiers = tiers[tiers.group_by == "tier"].set_index("group").saved_s_per_GBps
    top = tiers.idxmax()
    h = 1e7
    again = fs.training_step(_tier_changed(g, top, h), model="llama-3-8b", tp=8, global_batch=16)
    assert tiers[top] == pytest.approx((r.step_time - again.step_time) / h * 1e9, rel=1e-4)


def test_upgrade_plan_picks_the_oversubscribed_tier_first():
    g = fs.Upgrade("agg-core", factor=0.25).apply(tp.fat_tree(4))     # a quarter of the core bandwidth
    work = dict(op="all_to_all", size=2**24)
    plan = fs.upgrade_plan(g, work, budget=1.0, cost=lambda *_: 1.0)
    assert plan.upgrade.tolist() == ["agg-core"]
    exact = fs.collective(fs.Upgrade("agg-core", factor=2.0).apply(g), **work).time
    assert plan.time_s.iloc[0] == pytest.approx(exact, rel=1e-12)
    table = fs.what_if(g, work, {"core x2": fs.Upgrade("agg-core", factor=2.0)})
    assert table.exact_s.iloc[0] == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match="exactly one"):
        fs.Upgrade("agg-core")
    with pytest.raises(ValueError, match="factor"):          # True is not a factor of 1
        fs.Upgrade("agg-core", factor=True)
    with pytest.raises(ValueError, match="budget"):          # nor a budget of 1
        fs.upgrade_plan(g, work, budget=True, cost=lambda *_: 1.0)


def test_what_if_linear_estimate_is_the_first_order_change():
    g = fs.Upgrade("agg-core", factor=0.3).apply(fs.Upgrade("edge-agg", factor=0.25).apply(tp.fat_tree(4)))
    work = dict(op="all_to_all", size=2**24)
    t = fs.what_if(g, work, {"tiny": fs.Upgrade("edge-agg", factor=1 + 1e-6), "x2": fs.Upgrade("edge-agg", factor=2.0)})
    t = t.set_index("upgrade")
    t0 = fs.collective(g, **work).time
    assert t.time_s["tiny"] == t0 and t.saved_s["tiny"] > 0
    assert t.linear_s["tiny"] - t0 == pytest.approx(t.exact_s["tiny"] - t0, rel=1e-4)
    assert t.exact_s["x2"] == pytest.approx(fs.collective(fs.Upgrade("edge-agg", factor=2.0).apply(g), **work).time,
                                            rel=1e-12)
    assert t.linear_s["x2"] < t.exact_s["x2"]          # far outside the linear range: the core takes over


def test_upgrade_plan_picks_by_time_saved_per_unit_cost_and_re_solves_after_each_pick():
    g = fs.Upgrade("agg-core", factor=0.3).apply(fs.Upgrade("edge-agg", factor=0.25).apply(tp.fat_tree(4)))
    work = dict(op="all_to_all", size=2**24)
    ups = {"edge-agg x2": fs.Upgrade("edge-agg", factor=2.0), "edge-agg x1.2": fs.Upgrade("edge-agg", factor=1.2)}
    cost = {"edge-agg x2": 4.0, "edge-agg x1.2": 1.0}
    t0 = fs.collective(g, **work).time
    saved = {n: t0 - fs.collective(u.apply(g), **work).time for n, u in ups.items()}
    assert saved["edge-agg x2"] > saved["edge-agg x1.2"] > 0      # the dearer saves more, not more per cost
    plan = fs.upgrade_plan(g, work, budget=5.0, cost=cost, upgrades=ups)
    assert plan.upgrade.tolist() == ["edge-agg x1.2", "edge-agg x2"]
    assert plan.saved_s.iloc[0] == pytest.approx(saved["edge-agg x1.2"], rel=1e-12)
    both = fs.collective(ups["edge-agg x2"].apply(ups["edge-agg x1.2"].apply(g)), **work).time
    assert plan.time_s.iloc[1] == pytest.approx(both, rel=1e-12) and plan.spent.tolist() == [1.0, 5.0]
    assert fs.upgrade_plan(g, work, budget=4.0, cost=cost, upgrades=ups).upgrade.tolist() == ["edge-agg x1.2"]


def test_a_grouped_bottleneck_structure_at_1024_gpus():
    g = tp.rail_optimized(128)                          # 1,024 GPUs
    n = len(tp.gpus(g))
    flows = fs.Flows.ring(n, 1e6)
    rm = fs.route(g, flows)
    a = max_min_fair(rm)
    server = np.asarray(flows.src) // 8
    graph = rate_sensitivity(rm, a).graph(groups=server)
    groups = [v for v, d in graph.nodes(data=True) if d["kind"] == "flow"]
    assert len(groups) == n // 8 and all(graph.nodes[v]["flows"] == 8 for v in groups)
    # every (saturated link, flow) incidence is one edge count: link -> group where the flow is held
    A = rm.to_scipy("csr")
    load = A @ np.asarray(a.rates)
    saturated = load >= rm.capacity * (1 - 1e-9)
    coo = A[saturated].tocoo()
    held = sum(d["flows"] for u, v, d in graph.edges(data=True) if u[0] == "link")
    passes = sum(d["flows"] for u, v, d in graph.edges(data=True) if u[0] == "group")
    assert held == int((np.asarray(a.bottleneck) >= 0).sum()) and held + passes == coo.nnz
    assert {u for u, v in graph.edges if u[0] == "link"} <= {("link", int(l)) for l in np.flatnonzero(saturated)}


def test_the_bottleneck_structure_graph_and_its_groups():
    # link 1 (capacity 1) holds flow 1 at 1; flow 1 then passes link 0, which holds flow 0 at 2
    A = sp.csc_matrix([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    cap = [3.0, 2.0]
    sens = rate_sensitivity(A, max_min_fair(A, cap), cap)
    g = sens.graph()
    held = {(u, v) for u, v in g.edges if u[0] == "link"}
    passes = {(u, v) for u, v in g.edges if u[0] == "flow"}
    assert held == {(("link", 1), ("flow", 1)), (("link", 1), ("flow", 2)), (("link", 0), ("flow", 0))}
    assert passes == {(("flow", 1), ("link", 0))}
    grouped = sens.graph(groups=np.array(["a", "a", "b"]))
    assert grouped.edges[("link", 1), ("group", "a")]["flows"] == 1
    assert grouped.nodes[("group", "a")]["flows"] == 2 and grouped.nodes[("group", "a")]["level"] == 1.0


def test_sensitivity_plots_draw():
    from matplotlib.figure import Figure

    from flowsolver import plot

    A = sp.csc_matrix([[1.0, 1.0], [0.0, 1.0]])
    g = rate_sensitivity(A, max_min_fair(A, [3.0, 1.0]), [3.0, 1.0]).graph()
    ax = plot.bottleneck_structure(Figure().subplots(), g)
    assert len(ax.collections) >= 2                   # the link and the flow markers
    import pandas as pd

    table = pd.DataFrame(dict(group_by=["tier", "tier", "link"], group=["a", "b", "0->1"],
                              saved_s_per_GBps=[1.0, 0.0, 1.0], saved_percent_per_GBps=[2.0, 0.0, 2.0]))
    assert len(plot.sensitivity_bars(Figure().subplots(), table).patches) == 2
    with pytest.raises(ValueError, match="group_by"):
        plot.sensitivity_bars(Figure().subplots(), table, group_by="tech")


def test_jax_grad_of_a_makespan_through_the_events_matches_differences():
    rng = np.random.default_rng(2)
    dense = np.zeros((5, 7))
    for f in range(7):
        dense[rng.choice(5, rng.integers(1, 3), replace=False), f] = 1.0
    A, cap, sizes = sp.csc_matrix(dense), rng.uniform(1, 4, 5), rng.uniform(1, 5, 7)
    with jax.enable_x64(True):
        grad = jax.grad(lambda c: fs.fair_makespan(A, sizes, c))(jnp.asarray(cap))
        forward = jax.jacfwd(lambda c: fs.fair_makespan(A, sizes, c))(jnp.asarray(cap))
    np.testing.assert_allclose(forward, grad, rtol=1e-12, atol=0.0)
    T = float(completion_times(A, sizes, cap).makespan)
    for l in range(5):
        c1, c2 = cap.copy(), cap.copy()
        c1[l] += 1e-6 * cap[l]
        c2[l] -= 1e-6 * cap[l]
        fd = (float(completion_times(A, sizes, c1).makespan) - float(completion_times(A, sizes, c2).makespan)) / (
            2e-6 * cap[l])
        assert float(grad[l]) == pytest.approx(fd, rel=1e-6, abs=1e-9 * T)


def test_an_eager_jvp_is_exact_along_its_tangent_at_a_tie():
    # the tie of test_a_tie_gives_both...: both links up together moves every flow by 1/2
    A = sp.csc_matrix([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    with jax.enable_x64(True):
        _, t = jax.jvp(lambda c: fair_rates(A, c), (jnp.asarray([2.0, 2.0]),), (jnp.asarray([1.0, 1.0]),))
        np.testing.assert_allclose(t, [0.5, 0.5, 0.5])
        with pytest.warns(RuntimeWarning, match="tie"):
            g = jax.grad(lambda c: fair_rates(A, c).sum())(jnp.asarray([2.0, 2.0]))
    np.testing.assert_allclose(g, [1.0, 1.0])          # each link alone, up: flow 1 (or 2) takes it all


def test_jax_grad_of_a_collective_time_is_its_time_gradient():
    g = fs.Upgrade("agg-core", factor=0.25).apply(tp.fat_tree(4))     # core-bound: no tie at the core
    r = fs.collective(g, "all_to_all", 2**24, algorithm="direct")
    cap = jnp.asarray([d["capacity"] for *_, d in g.edges(data=True)])
    with jax.enable_x64(True), pytest.warns(RuntimeWarning, match="one-sided"):
        grad = jax.grad(lambda c: fs.collective_time(g, "all_to_all", 2**24, c, algorithm="direct"))(cap)
    np.testing.assert_allclose(grad, r.time_gradient("up"), rtol=1e-12, atol=0.0)
    assert (np.asarray(grad) <= 0).all()


def test_a_ring_timed_by_nccls_model_differentiates_its_flow_solve():
    g = tp.rail_optimized(2)
    ring = fs.collective(g, "all_reduce", 2**28, algorithm="ring", protocol="Simple")
    nvlink = ring.sensitivity().query("group_by == 'tier'").set_index("group").saved_s_per_GBps["nvlink"]
    h = 1e7                                                    # bytes/s added to every NVLink
    again = fs.collective(_tier_changed(g, "nvlink", h), "all_reduce", 2**28, algorithm="ring", protocol="Simple")
    assert nvlink == pytest.approx((ring.time - again.time) / h * 1e9, rel=1e-3)


# --------------------------------------------------------------------------- extreme capacities
def test_a_makespan_derivative_too_large_for_float64_is_minus_inf_not_nan():
    """Flows of 1 and 3 bytes on one link of c = 1e-300 B/s: T = (1 + 3) / c = 4e300 s and
    dT/dc = -4 / c**2 = -4e600 s per B/s, past float64: -inf on both sides, never inf - inf.
    Along the capacity itself, dc = c, the derivative is -T = -4e300 (T scales as 1 / c)."""
    c = 1e-300
    cs = completion_sensitivity(sp.csc_matrix([[1.0, 1.0]]), sizes=[1.0, 3.0], capacity=[c])
    assert cs.makespan == pytest.approx(4.0 / c, rel=1e-12)
    for side in ("up", "down"):
        assert cs.gradient(side).tolist() == [-np.inf]
        assert cs.directional([c], side) == pytest.approx(-4.0 / c, rel=1e-9)
        assert cs.directional([1.0], side) == -np.inf


def test_a_tiny_link_beside_normal_ones_keeps_their_finite_derivatives():
    """Flow 0 crosses links 0 (1e-300 B/s) and 1 (1 B/s), flow 1 link 1 alone: flow 0 gets
    1e-300 and flow 1 the rest of link 1, ~1 B/s (2 bytes: done at 2 s). Then T = 1 / 1e-300
    is link 0's alone: dT/dc0 = -1 / c0**2 (-inf in float64), dT/dc1 = 0, dT/dc2 = 0 (link
    2 is unused)."""
    A = sp.csc_matrix([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    cs = completion_sensitivity(A, sizes=[1.0, 2.0], capacity=[1e-300, 1.0, 5.0])
    assert cs.makespan == pytest.approx(1e300, rel=1e-12)
    for side in ("up", "down"):
        assert cs.gradient(side).tolist() == [-np.inf, 0.0, 0.0]


@pytest.mark.parametrize("op,algorithm", [("all_to_all", "direct"), ("all_reduce", "ring"),
                                          ("all_reduce", "halving_doubling")])
def test_a_collective_over_a_link_of_1e_300_bytes_per_second_differentiates(op, algorithm):
    """The link's derivative is -inf (the true one, ~ -T / c ~ -1e606 s per B/s, is past
    float64), every other link's finite, none NaN; along the raw capacities themselves the
    time's transfer part scales as 1 / c: the derivative is minus the transfer seconds."""
    g = tp.fat_tree(4)
    edge = ("pod0/edge0", "pod0/agg0")
    g.edges[edge]["capacity"] = 1e-300
    i = list(g.edges).index(edge)
    r = fs.collective(g, op, 2**20, algorithm=algorithm)
    raw = np.array([d["capacity"] for *_, d in g.edges(data=True)])
    transfer = sum(s.count * s.transfer for s in r.steps)
    assert transfer > 1e300
    for side in ("up", "down"):
        grad = r.time_gradient(side)
        assert not np.isnan(grad).any() and grad[i] == -np.inf
        assert np.isfinite(np.delete(grad, i)).all()
        assert r.time_directional(raw, side) == pytest.approx(-transfer, rel=1e-6)


def test_a_float32_allocations_capped_flows_keep_their_demand_derivative():
    # two flows on a link of 2 bytes/s, flow 0 capped at 0.7: rates (d, 2 - d), so the demand
    # Jacobian's column 0 is [1, -1]. A float32 allocation's rate 0.7 rounds to 0.69999999: the
    # cap test at 1e-9 missed it and gave [0, 0]; the solver's bottleneck -1 says it is capped
    import scipy.sparse as sp
    from flowsolver import max_min_fair, rate_sensitivity
    A = sp.csc_matrix(np.array([[1.0, 1.0]]))
    for dtype in ("float64", "float32"):
        a = max_min_fair(A, [2.0], demands=[0.7, np.inf], dtype=dtype)
        col = rate_sensitivity(A, a).demand_jacobian().toarray()[:, 0]
        assert col.tolist() == [1.0, -1.0], dtype
