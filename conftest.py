"""Repository-wide pytest set-up (runs before any test module imports JAX).

* several fake CPU devices, so multi-device (sharded) code is tested on CPU;
* strict dtype promotion, so silent float64/float32 mixing fails in tests.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_NUMPY_DTYPE_PROMOTION", "strict")
os.environ.setdefault("MPLBACKEND", "Agg")

# ``python -m flowsolver`` entry point: importing it runs the command
collect_ignore = ["flowsolver/__main__.py"]
