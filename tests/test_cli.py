import json
import subprocess
import sys

import topologies as tp
from flowsolver.cli import main


def test_default_job_describes_the_64_gpu_cluster(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "GPUs 64, servers 8" in out
    # 32 NDR NICs of 50 GB/s on each side of the cut
    assert "bisection bandwidth (one direction): 1,600.0 GB/s" in out
    assert "ib_ndr: 50.0 GB/s per direction" in out and "nvlink4: 450.0 GB/s" in out


def test_topology_json_and_export(capsys, tmp_path):
    path = tmp_path / "ft.json"
    assert main(["topology", "--family", "fat_tree", "--k", "4", "--json", "--export", str(path)]) == 0
    desc = json.loads(capsys.readouterr().out)
    assert desc["gpus"] == 16 and desc["switches"] == 20
    assert tp.load(path).number_of_nodes() == 16 * 2 + 20


def test_each_family(capsys):
    for argv in (["--family", "leaf_spine"], ["--family", "dragonfly"],
                 ["--family", "torus", "--dims", "3", "3", "--mesh"],
                 ["--family", "rail_optimized", "--nodes", "2", "--server", "dgx_b200"]):
        assert main(["topology", *argv]) == 0
    assert capsys.readouterr().out.count("cluster:") == 4


def test_bad_input_gives_one_line_and_exit_2(capsys):
    assert main(["topology", "--family", "fat_tree", "--k", "6", "--link", "ib_qdr"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowsolver: error: link: unknown link technology 'ib_qdr'")
    assert len(err.strip().splitlines()) == 1


def test_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "flowsolver", "topology", "--family", "torus",
                          "--dims", "2", "2"], capture_output=True, text=True, check=True).stdout
    assert "GPUs 4" in out


def test_collective_table_and_formats(capsys):
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "16M", "-f", "4", "--algorithm", "ring"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("# all_reduce on 8 GPUs") and len(lines) == 2 + 3      # 1M, 4M, 16M
    assert main(["collective", "--nodes", "1", "-b", "1G", "-e", "1G", "--algorithm", "ring", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["size"] == 2**30 and abs(row["busbw_gbs"] - 370) < 0.1 * 370      # 8 x H100 ring, measured ~370
    assert main(["collective", "--nodes", "1", "-b", "1M", "-e", "1M", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "size,time_us,algbw_gbs,busbw_gbs,algorithm,bottleneck_tier"


def test_train_and_its_formats(capsys):
    argv = ["train", "--nodes", "2", "--model", "llama-3-8b", "--global-batch", "16"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "llama-3-8b on 16 GPUs (tp 8, pp 1, dp 2, ep 1)" in out and "communication overhead" in out
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {p["phase"] for p in data["phases"]} == {"tp", "dp"} and 0 < data["summary"]["comm_overhead"] < 1
    assert main(argv + ["--tp", "3"]) == 2
    assert "tp * pp * dp must equal the GPU count 16" in capsys.readouterr().err


def test_sweep_from_toml(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    out = tmp_path / "r.csv"
    cfg.write_text(f'[sweep]\ncache_dir = "{tmp_path / "cache"}"\n\n'
                   '[grid]\nnodes = [1, 2]\nlink = ["ib_ndr", "ib_hdr"]\nsize = [1048576]\n')
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "4 of 4 scenarios ok" in text and out.exists()
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress", "--csv"]) == 0     # resumed: all done
    assert capsys.readouterr().out.count("\n") == 1 + 4
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid\n")
    assert main(["sweep", str(bad)]) == 2
    assert "is not valid TOML" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_help_and_usage_errors(capsys):
    assert main(["--help"]) == 0
    assert "flowsolver collective --nodes 4" in capsys.readouterr().out
    assert main(["collective", "--family", "hypercube"]) == 2
    assert main(["collective", "-b", "1Q"]) == 2
    assert "size must be a number of bytes" in capsys.readouterr().err


def test_the_help_example_with_hashed_routing_inside_servers(capsys):
    # the --help example: on fat_tree(8) with DGX servers small all-reduces stay inside a
    # server, which crashed ecmp_hash ("need at least one array to concatenate")
    argv = ["collective", "--family", "fat_tree", "--k", "4", "--server", "dgx_h100", "--routing", "ecmp_hash",
            "--csv", "-b", "1M", "-e", "4M"]
    assert main(argv) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) >= 3 and rows[0].startswith("size")
