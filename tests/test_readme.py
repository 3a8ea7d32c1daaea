"""The README's examples, commands and environment hint work as written."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


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
    installed ``flowsolver`` script is that same function: tests/cli/test_cli.py runs it as a
    process), so the commands share this process's compiled kernels."""
    import shutil

    from flowsolver.cli import main

    text = README.read_text()
    blocks = re.findall(r"<!-- runnable[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "README marks no command block runnable"
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
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


def _make_recipe(target):
    """The commands of a Makefile target, with $(BIN) / $(VENV) expanded as the Makefile sets them."""
    make = (ROOT / "Makefile").read_text()
    venv = re.search(r"^VENV\s*\?=\s*(\S+)", make, re.M).group(1)
    recipe = re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)+)", make, re.M).group(1)
    return [line.strip().replace("$(BIN)", f"{venv}/bin").replace("$(VENV)", venv)
            for line in recipe.splitlines()], venv


def test_readme_states_the_test_command_ci_runs():
    """.ci/run runs make targets; the README names each, and gives `make test`'s own command."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert ci and all(line.startswith("make ") for line in ci), ci
    text = " ".join(README.read_text().split())
    for line in ci:
        assert f"`{line}`" in text, line
    (test_command,), _ = _make_recipe("test")
    assert f"`{test_command}`" in text, test_command
    assert "CI (`.ci/run`) runs exactly " + ", then ".join(f"`{c}`" for c in ci) in text


def test_environment_hint_matches_what_make_creates():
    """The README's `.venv` paths are the Makefile's virtual environment, and the `flowsolver`
    command it names is the script pyproject.toml installs there."""
    import tomllib

    _, venv = _make_recipe("run")
    text = README.read_text()
    assert f"source {venv}/bin/activate" in text
    assert f"{venv}/bin/flowsolver --help" in text
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["flowsolver"] == "flowsolver.cli:main"
    run, _ = _make_recipe("run")
    assert run == [f"{venv}/bin/flowsolver study"]


def test_readme_links_resolve():
    """Every relative link of the README names a file of the repository."""
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" not in target:
            assert (ROOT / target).is_file(), target


def test_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 170


def test_every_make_target_the_readme_names_exists():
    make = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z]+):", make, re.M))
    named = set(re.findall(r"`make ([a-z]+)`", README.read_text())) | set(
        re.findall(r"^make ([a-z]+)", README.read_text(), re.M))
    assert {"run", "test", "docs", "notebook"} <= named, named
    assert named <= targets, named - targets
