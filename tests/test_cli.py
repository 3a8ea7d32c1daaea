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
