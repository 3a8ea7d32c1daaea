"""Run every benchmark script in this folder and print its figures.

    python benchmarks/run.py            # all
    python benchmarks/run.py topology   # those whose file name contains 'topology'
"""

import subprocess
import sys
from pathlib import Path


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    here = Path(__file__).parent
    scripts = sorted(p for p in here.glob("*.py") if p.name != "run.py"
                     and all(a in p.name for a in argv))
    status = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        status |= subprocess.run([sys.executable, str(script)]).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
