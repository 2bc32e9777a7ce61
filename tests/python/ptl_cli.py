"""The native `ptl` the Python tests run: PTL_BUILD_DIR (default <repo>/build)/ptl."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PTL = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build")) / "ptl"


def ptl(*args):
    """Runs `ptl ARGS...`; returns its stdout (bytes), failing the test with its stderr."""
    r = subprocess.run([str(PTL), *map(str, args)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout
