"""``--cluster-max-bytes``: the command line reads a --cluster file larger than the reader's
default limit (node-link JSON 48 MiB, topologies.load's max_bytes), and a file over the limit is
refused naming that option (the collective command called it --log-max-bytes, an option for
nccl-tests logs)."""

import json

import pytest

import topologies as tp
from flowsolver.cli import main

MIB = 2**20


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """rail_optimized(2) (2 DGX H100, 16 GPUs) as node-link JSON padded with trailing
    whitespace (JSON allows it) to 49 MiB, past the 48 MiB default."""
    path = tmp_path_factory.mktemp("big") / "g.json"
    tp.save(tp.rail_optimized(2), path)
    with open(path, "a") as f:
        f.write(" " * (49 * MIB - path.stat().st_size))
    assert path.stat().st_size == 49 * MIB
    return path


@pytest.mark.parametrize("command", [["topology"], ["collective", "-b", "1M", "-e", "1M"]])
def test_a_file_over_the_default_is_refused_naming_the_option(capsys, padded, command):
    assert main([*command, "--cluster", str(padded)]) == 2
    err = capsys.readouterr().err
    assert f"more than the limit of {48 * MIB} bytes: pass --cluster-max-bytes 49M" in err
    assert "--log-max-bytes" not in err and "max_bytes=" not in err


def test_the_option_reads_a_larger_file(capsys, padded):
    assert main(["topology", "--cluster", str(padded), "--cluster-max-bytes", "64M", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"] == 16 and d["servers"] == 2                  # 2 DGX H100 of 8 GPUs


def test_the_suggested_size_reads_the_file(capsys, tmp_path):
    path = tp.save(tp.fat_tree(4), tmp_path / "f.json")
    assert main(["topology", "--cluster", str(path), "--cluster-max-bytes", "1K"]) == 2
    err = capsys.readouterr().err
    size = path.stat().st_size
    suggested = -(-size // 1024)                                   # the next whole KiB
    assert f"the file has {size} bytes, more than the limit of 1024 bytes: pass --cluster-max-bytes " \
           f"{suggested}K" in err
    assert main(["topology", "--cluster", str(path), "--cluster-max-bytes", f"{suggested}K", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 16       # fat_tree(4): k^3/4 hosts


@pytest.mark.parametrize("value, said", [("0", "--cluster-max-bytes must be at least 1 byte, got '0'"),
                                         ("1GB", "--cluster-max-bytes: size '1GB' is ambiguous")])
def test_a_bad_limit_is_named(capsys, tmp_path, value, said):
    path = tp.save(tp.fat_tree(4), tmp_path / "f.json")
    assert main(["topology", "--cluster", str(path), "--cluster-max-bytes", value]) == 2
    assert said in capsys.readouterr().err


def test_the_limit_without_a_cluster_file_is_an_error(capsys):
    assert main(["topology", "--cluster-max-bytes", "64M"]) == 2
    assert "--cluster-max-bytes: the limit of a --cluster file's size" in capsys.readouterr().err
