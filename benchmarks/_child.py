"""Run one benchmark case in a fresh Python process (its own peak memory and compilation)."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, *args: str, timeout: float | None = None):
    """``python -c code args...``: ``(result, None)`` with the JSON object of its last output
    line, or ``(None, the last line of its error output)`` when it failed."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit status {done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1]), None
