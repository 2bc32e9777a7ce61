#!/usr/bin/env bash
# The main job: set up, build, and train the Small preset on TinyShakespeare into runs/<time>/,
# then print a sample from the trained model. Extra arguments go to `ptl train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/ptl train "$@"
latest=$(ls -td runs/*/ | head -n 1)
echo
echo "sample from ${latest}model.tinygpt:"
build/ptl sample "${latest}model.tinygpt" --prompt "ROMEO:" --max-tokens 300
