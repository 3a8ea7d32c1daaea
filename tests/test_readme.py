"""The README's quickstart runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_quickstart_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python block"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README quickstart", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "1024 {'leaf': 32, 'spine': 16}"
    assert out[1] == "25.6 TB/s"
    assert [float(x) for x in out[2].split()] == [50.0, 450.0]   # NDR 400 Gb/s; 18 x 25 GB/s


def test_runnable_command_blocks_run_as_written(tmp_path, monkeypatch, capsys):
    """Each command of the runnable block through the CLI's ``main`` in this process (the
    installed ``flowsolver`` script is that same function: tests/test_cli.py runs it as a
    process), so the commands share this process's compiled kernels."""
    import shlex
    import shutil

    from flowsolver.cli import main

    text = README.read_text()
    blocks = re.findall(r"<!-- runnable[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "README marks no command block runnable"
    shutil.copytree(README.parent / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            argv = shlex.split(command)
            assert argv[0] == "flowsolver", command
            status = main(argv[1:])
            captured = capsys.readouterr()
            assert status == 0, f"{command}: {captured.err.strip()[-500:]}"
            assert captured.out.strip(), command
    assert (tmp_path / "results.parquet").exists()
