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


def test_runnable_command_blocks_run_as_written(tmp_path):
    import os
    import shlex
    import shutil
    import subprocess
    import sys

    text = README.read_text()
    blocks = re.findall(r"<!-- runnable[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "README marks no command block runnable"
    root = README.parent
    shutil.copytree(root / "examples", tmp_path / "examples")
    exe = shutil.which("flowsolver", path=os.path.dirname(sys.executable)) or "flowsolver"
    for block in blocks:
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            argv = shlex.split(command)
            assert argv[0] == "flowsolver", command
            done = subprocess.run([exe, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{command}: {done.stderr.strip()[-500:]}"
            assert done.stdout.strip(), command
    assert (tmp_path / "results.parquet").exists()
