"""Repository-wide pytest set-up (runs before any test module imports JAX).

* several fake CPU devices, so multi-device (sharded) code is tested on CPU;
* strict dtype promotion, so silent float64/float32 mixing fails in tests;
* caches and kernel files in a temporary folder, never under the home directory; JAX's
  persistent compilation cache (on by default for users) off.
"""

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_NUMPY_DTYPE_PROMOTION", "strict")
os.environ.setdefault("MPLBACKEND", "Agg")

# nothing the tests or the notebooks they execute run writes under the home directory: the
# JAX compilation cache, matplotlib's, IPython's and Jupyter's files go to a temporary folder
_scratch = tempfile.mkdtemp(prefix="flowsolver-tests-")
atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
for _name, _sub in (("XDG_CACHE_HOME", "cache"), ("MPLCONFIGDIR", "matplotlib"), ("IPYTHONDIR", "ipython"),
                    ("JUPYTER_RUNTIME_DIR", "jupyter-runtime")):
    os.environ[_name] = os.path.join(_scratch, _sub)
os.environ["FLOWSOLVER_CACHE_DIR"] = "off"      # no persistent compilation cache in tests (on by default)

# hypothesis: the "ci" profile (default) keeps property tests to a few dozen examples each,
# HYPOTHESIS_PROFILE=slow runs ten times as many (python -m pytest -m "slow or not slow")
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=25, deadline=None,
                              suppress_health_check=[HealthCheck.function_scoped_fixture])
    settings.register_profile("slow", max_examples=250, deadline=None,
                              suppress_health_check=[HealthCheck.function_scoped_fixture])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:          # the test extra is not installed: no property tests run anyway
    pass

#: the catalogues users extend (``register_part``, ``register_transport``, ``register_link``,
#: ``register_server``, ``register_policy``, ``register_algorithm``): module and dictionary names
_CATALOGUES = (("topologies.parts", "_PARTS"), ("topologies.parts", "_RATE_PART"),
               ("topologies.transports", "_CATALOGUE"), ("topologies.links", "_CATALOGUE"),
               ("topologies.servers", "_SERVERS"), ("flowsolver.routing._policies", "_REGISTRY"),
               ("flowsolver.collectives._algorithms", "_REGISTRY"))


#: the registries users extend (``register_family``, ``register_reader``): module and dictionary
#: names; each module's ``_BUILTIN`` names the library's own entries. A registry whose module
#: is not imported yet is left alone (``flowsolver.traces`` loads JAX) and, once a test imports
#: it, loses the entries that test added (the built-in ones stay)
_REGISTRIES = (("topologies.build", "_REGISTRY"), ("topologies.formats", "_READERS"),
               ("flowsolver.traces._readers", "_READERS"))


@pytest.fixture(autouse=True)
def _catalogues_restored():
    """Each test and doctest starts from the library's own catalogues and registries: a part,
    transport, link, server model, topology family, file reader, routing policy or collective
    algorithm that a test or a docs example registers would otherwise stay for every later
    test (and compete in the bill's automatic choices, or in ``"auto"``)."""
    import importlib
    import sys

    saved = [(d, dict(d)) for d in (getattr(importlib.import_module(m), name) for m, name in _CATALOGUES)]
    kept = {(m, name): dict(getattr(sys.modules[m], name)) for m, name in _REGISTRIES if m in sys.modules}
    yield
    for d, content in saved:
        d.clear()
        d.update(content)
    for m, name in _REGISTRIES:
        if m in sys.modules:
            module = sys.modules[m]
            d, content = getattr(module, name), kept.get((m, name), {})
            builtin = {k: d[k] for k in getattr(module, "_BUILTIN", ()) if k in d}
            d.clear()
            d.update({**builtin, **content})


#: memory mappings past which the compiled programs are dropped between test modules. Linux
#: lets a process hold vm.max_map_count mappings (65,530 by default); every program XLA compiles
#: for the CPU maps about 3.4 regions (measured: 200 small jitted functions took 424 -> 1,091
#: mappings, 499 after ``jax.clear_caches()``) and keeps them while JAX caches the program, so
#: one process that compiles some twenty thousand programs, as this suite does, runs out: the
#: next compile's mmap fails inside XLA and the process segfaults (the suite of 2026-12-05 did,
#: at 95 %, in a test that passes alone)
_MAPS_CLEAR_ABOVE = 30_000


@pytest.fixture(autouse=True, scope="module")
def _compiled_programs_released():
    """After each test module, JAX's compiled programs are dropped once the process holds more
    than :data:`_MAPS_CLEAR_ABOVE` memory mappings (the later modules compile what they use)."""
    yield
    import sys

    if "jax" not in sys.modules:
        return
    from flowsolver.solver._placement import mapping_count

    mappings = mapping_count()          # None: not Linux, no /proc (and no such limit to guard)
    if mappings is not None and mappings > _MAPS_CLEAR_ABOVE:
        import gc

        sys.modules["jax"].clear_caches()
        gc.collect()


@pytest.fixture(autouse=True)
def _no_drop_inside_a_test():
    """The solver's own drop of compiled programs near the mapping limit
    (``flowsolver.solver._placement.release_compiled_programs``) held off inside tests, whose
    recompile counts it would upset; the module-scoped fixture above bounds the mappings
    instead. The tests of the drop set ``_MAPS["last"]`` themselves."""
    import sys

    placement = sys.modules.get("flowsolver.solver._placement")
    if placement is None:
        yield
        return
    saved = placement._MAPS["last"]
    placement._MAPS["last"] = float("inf")
    yield
    placement._MAPS["last"] = saved


# ``python -m flowsolver`` entry point: importing it runs the command
collect_ignore = ["flowsolver/__main__.py"]
