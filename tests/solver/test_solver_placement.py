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
