"""NCCL_ALGO / NCCL_PROTO lists read as NCCL reads them, and ``algorithm=`` / ``protocol=`` as
several names: NCCL's choice among them (a run with NCCL_ALGO=Ring,Tree never runs NVLS)."""

import json

import pytest

import topologies as tp
from flowsolver import calibrate, collective
from flowsolver._nccl_env import ALGO_NAMES, PROTO_NAMES, allowed, parse

# NCCL's own examples of its syntax, in the comment above parseList (src/graph/tuning.cc:44-53,
# master 5067397c): "Enable ring and collnetdirect for all functions, then select tree and
# collnetdirect for allreduce and ring for broadcast"; "Enable LL and Simple for all functions,
# but everything except LL for allreduce"; "Enable everything but LL128, but only LL128 for allreduce".


def test_nccl_s_own_examples_of_its_syntax_read_as_its_comment_says():
    r = parse("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", ALGO_NAMES)
    assert r["AllReduce"] == {"tree", "collnetdirect"} and r["Broadcast"] == {"ring"}
    assert r["AllGather"] == r["ReduceScatter"] == r["Reduce"] == {"ring", "collnetdirect"}
    r = parse("LL,Simple;allreduce:^LL", PROTO_NAMES)
    assert r["AllReduce"] == {"ll128", "simple"} and r["AllGather"] == {"ll", "simple"}
    r = parse("^LL128;allreduce:LL128", PROTO_NAMES)
    assert r["AllReduce"] == {"ll128"} and r["Broadcast"] == {"ll", "simple"}


def test_names_and_functions_match_in_any_case_and_what_nccl_refuses_is_an_error():
    # strcasecmp on names and functions; an unknown name or function, or a second entry without a
    # function, is ncclInvalidUsage (tuning.cc parseList): the run would not have started
    assert parse("RING,tree", ALGO_NAMES) == parse("Ring,Tree", ALGO_NAMES)
    assert parse("ALLREDUCE:nvls", ALGO_NAMES)["AllReduce"] == {"nvls"}
    for value, said in (("Ring,Foo", "'Foo' is not one of NCCL's names"),
                        ("allreduc:ring", "'allreduc' is not one of NCCL's functions"),
                        ("Ring;Tree", "every entry but the first must name its function")):
        with pytest.raises(ValueError, match=said):
            parse(value, ALGO_NAMES)
    # NCCL before 2.24 read one list for all functions and skipped names it did not know
    assert parse("Ring,Foo", ALGO_NAMES, version="2.21.5")["AllReduce"] == {"ring"}


def test_what_a_value_allowed_each_op():
    assert set(allowed("Ring,Tree", "all_reduce", ALGO_NAMES)) == {"ring", "tree"}
    assert "nvls" not in allowed("^NVLS", "all_reduce", ALGO_NAMES)
    assert allowed("allreduce:ring;allgather:nvls", "all_reduce", ALGO_NAMES) == ("ring",)
    assert allowed("allreduce:ring;allgather:nvls", "all_gather", ALGO_NAMES) == ("nvls",)
    # a function no entry names keeps NCCL's defaults (parseList writes only the named prefix's
    # entries): nothing set, which matters for LL128, whose default 2 is its path rule
    assert allowed("allreduce:ring;allgather:nvls", "reduce_scatter", ALGO_NAMES) is None
    assert allowed("allgather:LL", "all_reduce", PROTO_NAMES) is None
    # send / receive and all-to-all are not among NCCL's functions (src/init.cc ncclFuncStr)
    assert allowed("LL", "send_recv", PROTO_NAMES) is None and allowed("Ring", "all_to_all", ALGO_NAMES) is None


def test_several_algorithms_are_nccl_s_choice_among_them():
    g = tp.rail_optimized(nodes=1)
    for size in (2**22, 2**26, 2**30):
        r = collective(g, "all_reduce", size, algorithm=["ring", "tree"])
        assert r.algorithm in ("ring", "tree")
        # NCCL picks the least estimate among the allowed (algorithm, protocol) entries
        allowed_est = {k: v for k, v in r.estimates.items() if k.split("/")[0] in ("ring", "tree")}
        assert f"{r.algorithm}/{r.protocol}" == min(allowed_est, key=allowed_est.get)
        assert "nvls/Simple" not in r.estimates
    assert collective(g, "all_reduce", 2**30).algorithm == "nvls"        # what the list excluded would win
    assert collective(g, "all_gather", 2**30, algorithm=("ring", "tree")).algorithm == "ring"  # tree: no all-gather
    r = collective(g, "all_reduce", 2**30, protocol=["LL", "LL128"])
    assert r.protocol in ("LL", "LL128") and not any(k.endswith("/Simple") for k in r.estimates)


def test_a_bad_set_is_an_error_naming_the_parameter():
    g = tp.rail_optimized(nodes=1)
    for kw, said in ((dict(algorithm=[]), "algorithm must name at least one algorithm"),
                     (dict(algorithm=["ring", "foo"]), "algorithm names 'foo', not an algorithm"),
                     (dict(protocol=[]), "protocol must name at least one protocol"),
                     (dict(protocol=["LL", "ll128"]), "protocol names 'll128', not a protocol")):
        with pytest.raises(ValueError, match=said):
            collective(g, "all_reduce", 2**20, **kw)
    with pytest.raises(ValueError, match="algorithm for all_gather: none of tree runs all_gather"):
        collective(g, "all_gather", 2**20, algorithm=["tree"])


HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
SIZES = [2**k for k in (20, 22, 24, 26, 28, 30)]


def _log(times, algo):
    devices = "".join(f"#  Rank {r} Group  0 Pid {r} on node0 device {r} [0x0f] NVIDIA H100\n" for r in range(8))
    return (f"node0:1:1 [0] NCCL INFO NCCL_ALGO set by environment to {algo}\n" + devices + HEADER
            + "".join(f"{s} {s // 4} float sum -1 {t * 1e6:.2f} 0 0 0\n" for s, t in zip(SIZES, times)))


@pytest.mark.parametrize("algo", ["Ring,Tree", "^NVLS,NVLSTree"])
def test_compare_and_calibrate_keep_to_what_the_log_s_nccl_algo_allowed(algo, tmp_path, capsys):
    # before: a Ring,Tree run was compared with NVLS from 4 MiB up, and calibrate derated NVLink to 0.62
    pytest.importorskip("pandas")
    from flowsolver.cli import main

    g = tp.rail_optimized(nodes=1)
    # the run: the library's ring (NCCL's pick among ring and tree at every size here)
    text = _log([collective(g, "all_reduce", s, algorithm="ring").time for s in SIZES], algo)
    path = tmp_path / "all_reduce.log"
    path.write_text(text)
    assert main(["collective", "--nodes", "1", "--op", "all_reduce", "--compare", str(path), "--json"]) == 0
    assert {r["algorithm"] for r in json.loads(capsys.readouterr().out)} <= {"ring", "tree"}
    cal = calibrate(g, [text], op="all_reduce")
    # a log of the library's own prediction calibrates back to the catalogue's NVLink efficiency
    assert cal.efficiency.get("nvlink4", tp.get_link("nvlink4").efficiency) == \
        pytest.approx(tp.get_link("nvlink4").efficiency, rel=2e-3)
    assert cal.residuals["error"].abs().max() < 5e-3


def test_flowsolver_s_own_names_beside_nccl_s_and_an_exclusion_by_meaning():
    # the command line's --algorithm takes flowsolver's names too (nvls_tree beside NCCL's
    # NVLSTree): excluding either spelling excludes the algorithm, and an exclusion keeps to
    # NCCL's algorithms (^NVLS is never halving-doubling)
    from flowsolver.collectives import setting_choices

    own = {"nvls_tree": "nvls_tree", "halving_doubling": "halving_doubling"}
    assert allowed("^nvls_tree", "all_reduce", ALGO_NAMES, also=own) == ("tree", "ring", "nvls", "pat")
    assert allowed("^NVLSTree", "all_reduce", ALGO_NAMES, also=own) == ("tree", "ring", "nvls", "pat")
    assert allowed("Ring,halving_doubling", "all_reduce", ALGO_NAMES, also=own) == ("ring", "halving_doubling")
    assert setting_choices("^nvls_tree", "auto", "all_reduce") == (("ring", "tree", "nvls"), "auto")
    assert setting_choices("^CollNetDirect,CollNetChain", "^ll128", "all_reduce") == ("auto", ("LL", "Simple"))
    with pytest.raises(ValueError, match="'halving_doubling' is not one of NCCL's names"):
        allowed("halving_doubling", "all_reduce", ALGO_NAMES)


def test_naming_all_three_protocols_is_nccl_proto_set_so_ll128_runs_where_its_default_is_off():
    # NCCL_PROTO set at all, even to LL,LL128,Simple, overwrites LL128's default 2 with 1
    # (tuning.cc parseList sets every listed name to 1); the path rule that turns LL128 off
    # between GPUs with no NVLink runs only while it is 2 (tuning.cc, `pEnable == 2 && p ==
    # NCCL_PROTO_LL128`). So on PCIe-only GPUs the three named are NCCL's choice over every
    # protocol, LL128 included: the least estimate of the union of the two-protocol lists.
    g = tp.rail_optimized(nodes=1, server="pcie_8gpu")
    size = 4 << 20
    assert collective(g, "all_reduce", size).protocol != "LL128"           # unset: its default is off here
    a = collective(g, "all_reduce", size, protocol=["LL", "Simple"])
    b = collective(g, "all_reduce", size, protocol=["LL128", "Simple"])
    union = {**a.estimates, **b.estimates}
    best = min(union, key=union.get)
    three = collective(g, "all_reduce", size, protocol=["LL", "LL128", "Simple"])
    assert f"{three.algorithm}/{three.protocol}" == best and three.protocol == "LL128"
    alg, proto = best.split("/")
    assert three.time == pytest.approx(collective(g, "all_reduce", size, algorithm=alg, protocol=proto).time)


def test_a_protocol_set_for_another_function_leaves_ll128_s_default_rule():
    # NCCL_PROTO=allgather:LL sets AllGather's protocols only; all-reduce's LL128 keeps its
    # default 2, so on PCIe-only GPUs the path rule turns it off as with NCCL_PROTO unset (the
    # same pick and time as "auto"); naming all-reduce's protocols asks for LL128
    from flowsolver.collectives import setting_choices
    g = tp.rail_optimized(nodes=1, server="pcie_8gpu")
    size = 4 << 20
    alg, proto = setting_choices("auto", "allgather:LL", "all_reduce")
    assert proto == "auto"
    unset = collective(g, "all_reduce", size)
    r = collective(g, "all_reduce", size, algorithm=alg, protocol=proto)
    assert (r.algorithm, r.protocol, r.time) == (unset.algorithm, unset.protocol, unset.time)
    assert unset.protocol != "LL128"
    assert setting_choices("auto", "allreduce:LL,LL128,Simple", "all_reduce")[1] == ("LL", "LL128", "Simple")
