#!/usr/bin/env bash
# Faults during a training run, each of which must end in a clear error that keeps the last good
# checkpoint:
#
#   tests/reliability/faults.sh [--ptl build/ptl]
#
#   disk-full   the run's folder is a small tmpfs that holds one checkpoint but not the second
#               (a save writes a temporary, then renames it): the save fails with "No space left
#               on device", and the checkpoint of the save before still loads.
#   read-only   the folder is remounted read-only before a resume: the resume refuses to start,
#               naming the file it cannot write, and the checkpoint is untouched.
#   replaced    another program replaces model.tinygpt while the run trains: the run does not
#               overwrite it, saves its own state beside it (model.step-N.tinygpt, which resumes)
#               and stops with a message naming both.
#
# disk-full and read-only mount a tmpfs, which needs root (they are skipped otherwise). Prints one
# JSON line per case {"case", "ok", "message"}; exits 1 if any case failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ptl=build/ptl
while (($#)); do
  case "$1" in
    --ptl) ptl=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "faults.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $ptl ]] || { echo "faults.sh: no ptl at $ptl (build it, or pass --ptl)" >&2; exit 1; }
ptl=$(realpath "$ptl")
work=$(mktemp -d)
mnt=$work/mnt
cleanup() { mountpoint -q "$mnt" && umount "$mnt"; rm -rf "$work"; }
trap cleanup EXIT
python3 -c "import random; r=random.Random(1); print(' '.join(r.choice(['to','be','or','not','the','king','queen','and']) for _ in range(30000)))" > "$work/t.txt"
common=(--preset tiny --data "$work/t.txt" --sample-every 0 --threads 2)
failed=0
report() {  # report CASE OK MESSAGE
  python3 -c 'import json,sys; print(json.dumps({"case": sys.argv[1], "ok": sys.argv[2] == "1", "message": sys.argv[3]}))' "$@"
  [[ $2 == 1 ]] || failed=1
}
loads_at() {  # loads_at CKPT STEP: the checkpoint loads and is at that step
  "$ptl" info "$1" --json 2>/dev/null | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['step'] == $2 else 1)"
}
can_mount=0
mkdir -p "$mnt"
if [[ $(id -u) == 0 ]] && mount -t tmpfs -o size=64k tmpfs "$mnt" 2>/dev/null; then
  umount "$mnt"
  can_mount=1
fi

# disk-full: a Tiny checkpoint with its optimizer state is about 850 KB.
if ((can_mount)); then
  "$ptl" train "${common[@]}" --steps 10 --eval-every 5 --out "$work/size" > /dev/null 2>&1
  size=$(stat -c %s "$work/size/model.tinygpt")
  mount -t tmpfs -o size=$((size * 3 / 2)) tmpfs "$mnt"
  out=$("$ptl" train "${common[@]}" --steps 20 --eval-every 5 --out "$mnt/run" 2>&1)
  rc=$?
  msg=$(tail -1 <<<"$out")
  ok=0
  [[ $rc != 0 && $msg == *"No space left on device"* && $msg == *"the last good checkpoint is $mnt/run/model.tinygpt (step 5)"* ]] &&
    loads_at "$mnt/run/model.tinygpt" 5 && ok=1
  report disk-full $ok "$msg"
  umount "$mnt"
else
  report disk-full 1 "skipped: mounting a tmpfs needs root"
fi

# read-only: a run saved at step 10, the folder made read-only, then --resume.
if ((can_mount)); then
  mount -t tmpfs -o size=8m tmpfs "$mnt"
  "$ptl" train "${common[@]}" --steps 20 --eval-every 5 --until 10 --out "$mnt/run" > /dev/null 2>&1
  before=$(sha256sum "$mnt/run/model.tinygpt")
  mount -o remount,ro "$mnt"
  out=$("$ptl" train --resume "$mnt/run/model.tinygpt" 2>&1)
  rc=$?
  msg=$(tail -1 <<<"$out")
  ok=0
  [[ $rc != 0 && $msg == *"$mnt/run/"* && $msg == *"Read-only file system"* && $(sha256sum "$mnt/run/model.tinygpt") == "$before" ]] &&
    loads_at "$mnt/run/model.tinygpt" 10 && ok=1
  report read-only $ok "$msg"
  umount "$mnt"
else
  report read-only 1 "skipped: mounting a tmpfs needs root"
fi

# replaced: once the first checkpoint is there, another file is renamed over it.
"$ptl" train "${common[@]}" --steps 3 --eval-every 3 --out "$work/other" > /dev/null 2>&1
"$ptl" train "${common[@]}" --steps 4000 --eval-every 50 --out "$work/run" > "$work/run.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -f $work/run/model.tinygpt ]] && break; sleep 0.05; done
cp "$work/other/model.tinygpt" "$work/run/replacement" && mv "$work/run/replacement" "$work/run/model.tinygpt"
wait $pid
rc=$?
msg=$(tail -1 "$work/run.log")
aside=$(ls "$work/run"/model.step-*.tinygpt 2>/dev/null | head -1)
ok=0
if [[ $rc != 0 && $msg == *"was replaced by another program"* && -n $aside && $msg == *"$aside"* ]] &&
  cmp -s "$work/run/model.tinygpt" "$work/other/model.tinygpt"; then
  step=${aside##*model.step-}
  step=${step%.tinygpt}
  loads_at "$aside" "$step" && "$ptl" train --resume "$aside" --until $((step + 5)) > /dev/null 2>&1 && ok=1
fi
report replaced $ok "$msg"
exit $failed
