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
