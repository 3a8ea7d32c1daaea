"""goodput and design: an input that would be ignored is refused, naming it and why, or used."""

import pytest

import topologies as tp
from flowsolver.cli import main
from flowsolver.reliability import JobResponse, goodput

GOODPUT = ["goodput", "--nodes", "2", "--checkpoint-cost", "30", "--restart", "300", "--trajectories", "10"]
DESIGN = ["design", "--gpus", "64", "--families", "leaf_spine", "--links", "ib_ndr", "--optics", "multimode",
          "--oversubscriptions", "1"]


@pytest.mark.parametrize("extra, said", [
    (["--repair", "4"], "--repair is the response without hot spares"),
    (["--shrink"], "--shrink is the response without hot spares"),
    (["--no-spares", "--repair", "4", "--dp", "2"], "--dp is the data-parallel degree a job shrinks by"),
])
def test_goodput_refuses_flags_its_response_would_ignore(capsys, extra, said):
    assert main(GOODPUT + extra) == 2
    assert said in capsys.readouterr().err


JOBS = ["goodput", "--nodes", "2", "--jobs", "8", "8", "--size", "1M"]


@pytest.mark.parametrize("extra, named", [
    (["--checkpoint-cost", "30", "--restart", "300"], "--checkpoint-cost, --restart"),
    (["--compute", "5", "--tokens", "16M"], "--compute, --tokens"),
    (["--degrade", "leaf-spine=0.001,4,0.5"], "--degrade"),
    (["--no-spares", "--shrink", "--dp", "2"], "--no-spares, --shrink, --dp"),
])
def test_goodput_jobs_refuses_the_trajectory_flags_it_would_ignore(capsys, extra, named):
    # --jobs times the jobs' collectives alone: a failure or checkpoint setting beside it changes nothing
    assert main(JOBS + extra) == 2
    err = capsys.readouterr().err
    assert f"{named} would be ignored beside it" in err


def test_goodput_jobs_alone_runs(capsys):
    assert main(JOBS) == 0
    assert "slowdown" in capsys.readouterr().out


@pytest.mark.parametrize("extra, said", [
    (["--tp", "4", "--pp", "2"], "--tp and --pp need --model"),
    (["--tp", "4"], "--tp needs --model"),
    (["--lifetime-days", "365"], "--lifetime-days needs --model"),
])
def test_design_refuses_training_flags_without_a_model(capsys, extra, said):
    assert main(DESIGN + ["--size", "64M"] + extra) == 2
    assert said in capsys.readouterr().err


def test_design_shows_capex_when_given_a_gpu_price_for_a_collective(capsys):
    # the table's capex per GPU: the network's USD per GPU (which leaves out the ConnectX-7 a GPU
    # the DGX comes with: 2,200 USD, in the GPU's price), plus 38,750 USD a GPU
    assert main(DESIGN + ["--size", "64M", "--gpu-price", "38750"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("family"))
    assert lines[head].split()[6] == "USD/GPU" and lines[head].split()[-1] == "capex/GPU"
    row = lines[head + 1].split()
    usd, capex = float(row[6].replace(",", "")), float(row[-1].replace(",", ""))
    assert capex == pytest.approx(usd + 38750.0, abs=1.0)


def test_api_refuses_what_it_would_ignore():
    with pytest.raises(ValueError, match="repair_time is the wait without spares"):
        JobResponse(checkpoint_cost=30.0, restart_time=300.0, repair_time=3600.0)
    g = tp.rail_optimized(1)
    step = lambda h: 1.0                                                  # noqa: E731
    resp = JobResponse(checkpoint_cost=30.0, restart_time=300.0)
    # checked at once, not only when a degraded fabric is met (nothing degrades here)
    for bad in (0, 2, float("nan"), True):
        with pytest.raises(ValueError, match="reroute_below must be in"):
            goodput(g, step, resp, days=1, trajectories=2, reroute="around", reroute_below=bad)
    with pytest.raises(ValueError, match="reroute_below .* is the threshold of reroute='around'"):
        goodput(g, step, resp, days=1, trajectories=2, reroute_below=0.5)


@pytest.mark.parametrize("flags, keywords", [
    (["--pp", "2", "--vp", "2", "--global-batch", "64"], dict(pp=2, vp=2, global_batch=64)),
    (["--tp", "1", "--ep", "8", "--etp", "1", "--global-batch", "64"], dict(tp=1, ep=8, etp=1, global_batch=64)),
])
def test_design_times_the_layout_train_takes(capsys, flags, keywords):
    """newuser27 #2: design took --tp and --pp only, a preset only, and said nothing of the batch:
    a 405B step timed at train's default 512 sequences and vp 1 (31 % bubble), no MoE from the CLI."""
    import json

    import flowsolver as fs

    model = "mixtral-8x7b" if "ep" in keywords else "llama-3-8b"
    assert main(DESIGN + ["--model", model, *flags, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    work = dict(model=model, **{"tp": 8, "pp": 1, **keywords})
    want = fs.design(64, work, families=("leaf_spine",), links=("ib_ndr",), optics=("multimode",),
                     oversubscriptions=(1.0,)).candidates[0]
    assert row["time"] == pytest.approx(want.time, rel=1e-12)
    assert main(DESIGN + ["--model", model, *flags]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    seq = fs.training.MODELS[model].seq_len
    assert f"global batch 64), 64 sequences of {seq:,} tokens a step" in head


def test_design_takes_a_model_file(capsys, tmp_path):
    path = tmp_path / "small.toml"
    path.write_text("layers = 4\nhidden = 1024\nffn = 4096\nheads = 8\nkv_heads = 8\nvocab = 32000\nseq_len = 2048\n")
    assert main(DESIGN + ["--model", str(path), "--global-batch", "32"]) == 0
    assert "32 sequences of 2,048 tokens a step" in capsys.readouterr().out.splitlines()[0]


def test_design_layout_flags_need_a_model(capsys):
    assert main(DESIGN + ["--size", "64M", "--ep", "8"]) == 2
    assert "--ep needs --model" in capsys.readouterr().err


def test_nic_reproduces_a_design_xdr_row(capsys):
    """newuser27 #4: design's XDR candidates have ConnectX-8 NICs; --link ib_xdr elsewhere kept the
    server's ConnectX-7 (400G), so no command reproduced an XDR row. --nic ib_xdr does: the same
    graph, so the same all-to-all time; the row's note gives the PCIe's effective 48 GB/s."""
    import json

    import flowsolver as fs

    row_args = ["design", "--gpus", "16", "--server", "dgx_h200", "--op", "all_to_all", "--size", "64M",
                "--links", "ib_xdr", "--radixes", "64", "--optics", "multimode", "--oversubscriptions", "1",
                "--families", "rail_optimized"]
    assert main(row_args + ["--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert "48 GB/s as a long transfer reaches it" in row["message"]
    g = tp.rail_optimized(2, server=tp.get_server("dgx_h200").with_(nic="ib_xdr"), link="ib_xdr")
    assert row["time"] == pytest.approx(fs.collective(g, "all_to_all", 64 * 2**20).time, rel=1e-12)
    assert main(["collective", "--nodes", "2", "--server", "dgx_h200", "--link", "ib_xdr", "--nic", "ib_xdr",
                 "--op", "all_to_all", "-b", "64M", "-e", "64M", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out if isinstance(out, list) else out["rows"]
    assert rows[0]["time_us"] * 1e-6 == pytest.approx(row["time"], rel=1e-4)
    assert main(["topology", "--nodes", "2", "--nic", "nope"]) == 2
    assert "--nic must be a link technology" in capsys.readouterr().err


def test_sharp_is_said_where_an_infiniband_all_reduce_crosses_servers(capsys):
    """newuser27 #5: InfiniBand's in-network reduction is not modelled and design's IB-or-RoCE
    answer did not say so."""
    from flowsolver.cli._words import SHARP_NOTE

    for cmd, said in ((["collective", "--nodes", "2", "-b", "1M", "-e", "1M"], True),
                      (["collective", "--nodes", "1", "-b", "1M", "-e", "1M"], False),
                      (["collective", "--nodes", "2", "--link", "roce_400g", "-b", "1M", "-e", "1M"], False),
                      (["collective", "--nodes", "2", "--op", "all_to_all", "-b", "1M", "-e", "1M"], False),
                      (DESIGN + ["--size", "64M"], True)):
        assert main(cmd) == 0
        assert (SHARP_NOTE in capsys.readouterr().out) is said, cmd


def test_nic_applies_to_the_server_the_family_builds(capsys):
    # review27 H1: --nic put a DGX H100 in place of a torus's own one-GPU hosts (4 GPUs became 32)
    assert main(["topology", "--family", "torus", "--dims", "2", "2", "--nic", "ib_ndr"]) == 2
    assert "--nic needs --server with --family torus" in capsys.readouterr().err
    assert main(["topology", "--nodes", "2", "--nic", "ib_xdr", "--json"]) == 0      # rail_optimized: its DGX H100
    import json
    assert json.loads(capsys.readouterr().out)["gpus"] == 16
