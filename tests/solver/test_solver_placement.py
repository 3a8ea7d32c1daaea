"""Where solves run (device="auto" / "cpu" / "accelerator") and the persistent compilation
cache that is on by default for users and off in tests (issue 31)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import jax

from flowsolver import max_min_fair
from flowsolver.solver import _placement

ROOT = Path(__file__).resolve().parents[2]


def test_device_choices_give_the_same_rates():
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    want = [1.0, 1.0, 2.0]                                     # link 0 (2) shared by flows 0, 1; flow 2 takes the rest
    for device in ("auto", "cpu", jax.devices()[0]):
        assert max_min_fair(A, [2.0, 3.0], device=device).rates.tolist() == want
    if jax.default_backend() == "cpu":
        with pytest.raises(ValueError, match="device='accelerator': JAX has no accelerator"):
            max_min_fair(A, [2.0, 3.0], device="accelerator")
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'accelerator' or a jax.Device, got 'gpu0'"):
        max_min_fair(A, [2.0, 3.0], device="gpu0")


def test_auto_sends_small_problems_to_the_cpu_when_an_accelerator_is_the_default(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")            # as on a GPU machine
    cpu = jax.devices("cpu")[0]
    with _placement.placement("auto", _placement.AUTO_CPU_SLOTS - 1):
        assert jax.config.jax_default_device == cpu
    with _placement.placement("auto", _placement.AUTO_CPU_SLOTS):
        assert jax.config.jax_default_device is None                     # the default (accelerator) device
    with _placement.placement("cpu", 10 ** 9):
        assert jax.config.jax_default_device == cpu


def test_the_local_devices_are_those_of_the_chosen_platform():
    with jax.default_device(jax.devices("cpu")[0]):
        assert _placement.local_devices() == tuple(jax.devices("cpu"))
    assert _placement.local_devices() == tuple(jax.devices())


def test_the_cache_folder_follows_the_environment():
    assert _placement.cache_folder({"FLOWSOLVER_CACHE_DIR": "0"}) is None
    assert _placement.cache_folder({"FLOWSOLVER_CACHE_DIR": "/x/y"}) == Path("/x/y")
    assert _placement.cache_folder({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/flowsolver/jax")
    assert _placement.cache_folder({"HOME": "/h"}) == Path("/h/.cache/flowsolver/jax")


def test_the_tests_run_without_a_persistent_cache():
    max_min_fair(sp.csc_matrix(np.ones((1, 2))), [2.0])
    assert _placement.ensure_compilation_cache() is None
    assert not jax.config.jax_compilation_cache_dir


CHILD = """
import json, os, numpy as np, scipy.sparse as sp, jax
from flowsolver import max_min_fair
max_min_fair(sp.csc_matrix(np.array([[1.0, 1.0], [0.0, 1.0]])), [4.0, 1.0])
print(json.dumps(dict(folder=jax.config.jax_compilation_cache_dir)))
"""


def _child(env):
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWSOLVER_CACHE_DIR", "XDG_CACHE_HOME")} | env
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_users_process_caches_compiled_kernels_in_the_users_cache_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    got = _child({"HOME": str(home)})
    folder = home / ".cache" / "flowsolver" / "jax"
    assert got["folder"] == str(folder)
    assert folder.is_dir() and any(folder.iterdir())                   # the kernels compiled were written
    off = _child({"HOME": str(tmp_path / "h2"), "FLOWSOLVER_CACHE_DIR": "off"})
    assert not off["folder"] and not (tmp_path / "h2").exists()


def _compiled_square():
    f = jax.jit(lambda x: x * x)
    f(np.float32(2.0))
    assert f._cache_size() == 1
    return f


def test_compiled_programs_are_dropped_past_half_the_mapping_limit_and_only_then(monkeypatch):
    monkeypatch.setitem(_placement._MAPS, "limit", None)
    monkeypatch.setitem(_placement._MAPS, "kept", 0.0)
    counts = []

    def count():
        counts.append(1)
        return 40_000 if len(counts) == 1 else 1_000          # a drop frees the programs' mappings

    f = _compiled_square()
    monkeypatch.setitem(_placement._MAPS, "last", float("-inf"))
    # 20,000 of a 65,530 limit: below half, nothing dropped
    assert not _placement.release_compiled_programs(count=lambda: 20_000, limit=lambda: 65_530, now=lambda: 100.0)
    assert f._cache_size() == 1
    # 40,000 of 65,530 (61 %) but within MAPS_CHECK_SECONDS of the last count: not counted again
    assert not _placement.release_compiled_programs(count=count, limit=lambda: 65_530,
                                                    now=lambda: 100.0 + _placement.MAPS_CHECK_SECONDS / 2)
    assert counts == [] and f._cache_size() == 1
    # counted again once MAPS_CHECK_SECONDS have passed: above half, the compiled program is gone
    assert _placement.release_compiled_programs(count=count, limit=lambda: 65_530,
                                                now=lambda: 100.0 + _placement.MAPS_CHECK_SECONDS)
    assert len(counts) == 2 and f._cache_size() == 0 and _placement._MAPS["kept"] == 0.0


def test_a_drop_that_leaves_the_process_above_half_its_limit_waits_for_half_the_rest(monkeypatch):
    # mappings that are not compiled programs (35,000 of 65,530 after a drop) would make every
    # check drop every program again; the next drop waits for 35,000 + 30,530 / 2 = 50,265
    monkeypatch.setitem(_placement._MAPS, "limit", 65_530)
    monkeypatch.setitem(_placement._MAPS, "kept", 0.0)
    held = iter([40_000, 35_000, 45_000, 50_265, 50_266, 30_000])
    release = lambda t: _placement.release_compiled_programs(count=lambda: next(held), now=lambda: t)  # noqa: E731
    monkeypatch.setitem(_placement._MAPS, "last", float("-inf"))
    assert release(10.0) and _placement._MAPS["kept"] == 50_265.0        # dropped at 40,000; 35,000 left
    assert not release(20.0) and not release(30.0)                       # 45,000, then 50,265: kept
    assert release(40.0) and _placement._MAPS["kept"] == 0.0             # 50,266: dropped; 30,000 left


def test_without_a_mapping_limit_to_read_nothing_is_counted(monkeypatch):
    monkeypatch.setitem(_placement._MAPS, "limit", None)
    monkeypatch.setitem(_placement._MAPS, "last", float("-inf"))
    f = _compiled_square()
    assert not _placement.release_compiled_programs(count=lambda: pytest.fail("counted"), limit=lambda: None,
                                                    now=lambda: 0.0)
    assert f._cache_size() == 1


def test_a_solve_drops_compiled_programs_when_the_process_is_near_its_mapping_limit(monkeypatch):
    if _placement.mapping_count() is None:
        pytest.skip("no /proc/self/maps here")
    f = _compiled_square()
    monkeypatch.setitem(_placement._MAPS, "last", float("-inf"))
    monkeypatch.setitem(_placement._MAPS, "limit", 2)      # any real process holds more than one mapping
    monkeypatch.setitem(_placement._MAPS, "kept", 0.0)
    rates = max_min_fair(sp.csc_matrix(np.array([[1.0, 1.0]])), [3.0]).rates
    assert rates.tolist() == [1.5, 1.5] and f._cache_size() == 0
