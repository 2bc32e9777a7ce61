"""The native tools the Python tests run: PTL_BUILD_DIR (default <repo>/build)/ptl and
tests/ptl_program_run (tests/parity/program_run.cpp)."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build"))
PTL = BUILD / "ptl"
RUN = BUILD / "tests" / "ptl_program_run"


def ptl(*args):
    """Runs `ptl ARGS...`; returns its stdout (bytes), failing the test with its stderr."""
    r = subprocess.run([str(PTL), *map(str, args)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout
