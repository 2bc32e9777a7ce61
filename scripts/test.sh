#!/usr/bin/env bash
# Every test: the C++ suite (GoogleTest through CTest) and the PyTorch parity suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "== PyTorch reference and parity tests (pytest)"
# Debian's torch lives in /usr/bin/python3, not in whatever python3 comes first on PATH.
/usr/bin/python3 -m pytest tests/python -q
