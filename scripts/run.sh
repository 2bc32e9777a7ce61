#!/usr/bin/env bash
# The main job: set up, build, and train `ptl train`'s default run (Medium, 4000 steps: about five
# minutes on two cores) on TinyShakespeare into runs/<time>/, then print a sample from the model it
# trained and one from the pretrained model in models/. Extra arguments go to `ptl train` (e.g.
# --preset tiny --steps 300 --out runs/mine); the first sample comes from the run this command trained.
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
if [[ -f models/shakespeare.tinygpt ]]; then
  echo
  echo "sample from the pretrained model, models/shakespeare.tinygpt (docs/models.md):"
  build/ptl sample models/shakespeare.tinygpt --prompt "ROMEO:" --max-tokens 300
fi
