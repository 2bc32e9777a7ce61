#!/usr/bin/env bash
# The main job: set up, build, and train the Small preset on TinyShakespeare into runs/<time>/,
# then print a sample from the trained model. Extra arguments go to `ptl train` (e.g. --preset
# tiny --steps 300 --out runs/mine); the sample comes from the run this command trained.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
out=""
resume=""
for ((i = 1; i <= $#; i++)); do
  a="${!i}"
  case "$a" in
    -h|--help) exec build/ptl train --help ;;
    --out=*) out="${a#--out=}" ;;
    --out) j=$((i + 1)); out="${!j:-}" ;;
    --resume=*) resume="${a#--resume=}" ;;
    --resume) j=$((i + 1)); resume="${!j:-}" ;;
  esac
done
if [[ -z "$out" && -n "$resume" ]]; then
  out="$(dirname "$resume")"  # a resumed run writes next to its checkpoint
elif [[ -z "$out" ]]; then
  out="runs/$(date +%Y%m%d-%H%M%S)"
  set -- "$@" --out "$out"
fi
build/ptl train "$@"
echo
echo "sample from $out/model.tinygpt:"
build/ptl sample "$out/model.tinygpt" --prompt "ROMEO:" --max-tokens 300
