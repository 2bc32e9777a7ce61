#!/usr/bin/env bash
# Kills a training run with SIGKILL at random moments, resumes it each time, and checks that
# nothing was lost or doubled:
#
#   tests/reliability/kill_resume.sh [--kills N] [--steps S] [--seed K] [--ptl build/ptl] [--keep DIR]
#
# A Tiny run of S steps (default 1500) that saves a checkpoint every 5 steps is started, then
# killed (kill -9) after a random 20-300 ms, N times (default 200); after every kill the run's
# checkpoint must load (`ptl info`), and the next start resumes it (`ptl train --resume`; a run
# killed before its first checkpoint starts again). When the kills are done the run finishes, and:
#   - metrics.jsonl holds one complete JSON line per step, 1..S in order (none torn, none doubled);
#   - no temporary of a killed save is left in the run's folder;
#   - the final weights equal, bit for bit, those of the same run never interrupted.
# Prints one JSON line {"kills", "resumes", "restarts", "steps", "seconds", "equal"} and exits 0
# when every check passed. The corpus is TinyShakespeare's first 200 KB ($PTL_DATA_DIR, else
# ../shared/data, else a synthetic text the script writes).
set -euo pipefail
cd "$(dirname "$0")/../.."
kills=200 steps=1500 seed=1 ptl=build/ptl keep=""
while (($#)); do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --ptl) ptl=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kill_resume.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $ptl ]] || { echo "kill_resume.sh: no ptl at $ptl (build it, or pass --ptl)" >&2; exit 1; }
ptl=$(realpath "$ptl")
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[[ -n $keep ]] || trap 'rm -rf "$work"' EXIT
RANDOM=$seed

src="${PTL_DATA_DIR:-../shared/data}/tinyshakespeare.txt"
if [[ -f $src ]]; then
  head -c 200000 "$src" > "$work/t.txt"
else
  python3 -c "import random; r=random.Random(1); print(' '.join(r.choice(['to','be','or','not','the','king']) for _ in range(40000)))" > "$work/t.txt"
fi
common=(--preset tiny --data "$work/t.txt" --steps "$steps" --eval-every 5 --sample-every 0 --threads 2 --seed 7)

t0=$SECONDS
"$ptl" train "${common[@]}" --out "$work/ref" --overwrite > "$work/ref.log" 2>&1

run=$work/run
n=0 resumes=0 restarts=0
start() {  # the next attempt: resume the checkpoint if there is one, else start again
  if [[ -f $run/model.tinygpt ]]; then
    resumes=$((resumes + 1))
    "$ptl" train --resume "$run/model.tinygpt" --threads 2 >> "$work/run.log" 2>&1 &
  else
    restarts=$((restarts + 1))
    "$ptl" train "${common[@]}" --out "$run" --overwrite >> "$work/run.log" 2>&1 &
  fi
  pid=$!
}
while ((n < kills)); do
  start
  sleep "0.$(printf '%03d' $((20 + RANDOM % 281)))"
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || { tail -5 "$work/run.log" >&2; echo "kill_resume.sh: the run failed (log: $work/run.log)" >&2; exit 1; }
    echo "kill_resume.sh: the run finished after $n kills; give more --steps for $kills" >&2
    exit 1
  fi
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  n=$((n + 1))
  if [[ -f $run/model.tinygpt ]] && ! "$ptl" info "$run/model.tinygpt" > "$work/info.log" 2>&1; then
    cat "$work/info.log" >&2
    echo "kill_resume.sh: after kill $n the checkpoint does not load" >&2
    exit 1
  fi
done
start
wait "$pid" || { tail -5 "$work/run.log" >&2; echo "kill_resume.sh: the last resume failed" >&2; exit 1; }

python3 - "$work" "$steps" "$n" "$resumes" "$restarts" "$((SECONDS - t0))" <<'EOF'
import json, struct, sys
work, steps, kills, resumes, restarts, seconds = sys.argv[1], *map(int, sys.argv[2:])
problems = []
lines = open(f"{work}/run/metrics.jsonl", "rb").read().split(b"\n")
if lines[-1] != b"":
    problems.append("metrics.jsonl does not end with a complete line")
got = []
for i, line in enumerate(lines[:-1]):
    try:
        got.append(json.loads(line)["step"])
    except (ValueError, KeyError):
        problems.append(f"metrics.jsonl line {i + 1} is torn: {line[:60]!r}")
if got != list(range(1, steps + 1)):
    doubled = len(got) - len(set(got))
    problems.append(f"metrics.jsonl steps are not 1..{steps} once each ({len(got)} lines, {doubled} doubled)")

def tensors(path):  # safetensors: 8-byte header length, JSON header, data
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + n])
    data = b[8 + n :]
    return {k: data[v["data_offsets"][0] : v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}

import glob
left = glob.glob(f"{work}/run/*.tmp-*")
if left:
    problems.append(f"temporaries of killed saves are left behind: {left[:3]}")

ref, run = tensors(f"{work}/ref/model.tinygpt"), tensors(f"{work}/run/model.tinygpt")
equal = ref.keys() == run.keys() and all(ref[k] == run[k] for k in ref)
if not equal:
    diff = [k for k in ref if run.get(k) != ref[k]]
    problems.append(f"the final tensors differ from the uninterrupted run's: {diff[:5]}")
print(json.dumps({"kills": kills, "resumes": resumes, "restarts": restarts, "steps": steps, "seconds": seconds, "equal": equal}))
for p in problems:
    print(f"kill_resume.sh: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
