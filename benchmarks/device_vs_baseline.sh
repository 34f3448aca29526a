#!/usr/bin/env bash
# One device call: this tree (A) against an older one (C) on the GPU machine, alternated
# A C C A …, with a process holding most of card 0's memory the whole time: the full screen
# after exec and the RSS after the start-up heap's freeze, paired in one call (the card's
# figures move between machines of one kind; docs/benchmarks.md).
#
#   BASELINE=DIR bash benchmarks/device_vs_baseline.sh OUT_DIR [ROUNDS] [SECONDS]
#
# DIR: a folder holding the older code's console/, widgets/ and actions/ (a git archive of
# them, e.g. `git archive REV console actions widgets | tar -x -C DIR`), carried to the device
# as an untracked folder of the tree. Both trees are compiled first (as pip compiles a wheel).
# Each session: bench_vs_nvitop.py's seat-console session (120x40 pty, 1 s refresh), SECONDS
# (default 15) after an 8 s warm-up (the heap is frozen and trimmed 5 s after mount), ROUNDS
# (default 3) rounds of A C C A. Writes device.log and one JSON per session to OUT_DIR.
set -u
out=${1:?usage: BASELINE=DIR device_vs_baseline.sh OUT_DIR [ROUNDS] [SECONDS]}
rounds=${2:-3}
secs=${3:-15}
base=${BASELINE:?BASELINE=DIR: the older tree}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PY:-python3}
scratch=$(mktemp -d)
exec > >(tee -a "$out/device.log") 2>&1
echo "== $(date -u +%FT%TZ) device_vs_baseline: $(nproc) cores, $($py --version 2>&1)"
$py -m pip install -q --no-index --find-links .wheels --no-build-isolation -e . \
  >"$scratch/install.log" 2>&1 || { echo "install failed"; tail -20 "$scratch/install.log"; exit 2; }
base=$(cd "$base" && pwd)
for d in actions widgets; do   # the archive's links, in case the copy dropped them
  [ -e "$base/console/$d" ] || ln -sfn "../$d" "$base/console/$d"
done
mkdir -p "$scratch/c" && ln -s "$base/console" "$scratch/c/seat_console"
$py -m compileall -q -j 0 console widgets actions "$base" >/dev/null 2>&1
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
gib=$($py -c "print(int(${HOLD_FRACTION:-0.70} * $total_mib / 1024))")
mkfifo "$scratch/hold_in"
$py scripts/gpu_hold.py --gib "$gib" <"$scratch/hold_in" >"$scratch/hold.json" 2>&1 &
exec 9>"$scratch/hold_in"
for _ in $(seq 90); do [ -s "$scratch/hold.json" ] && break; sleep 1; done
echo "hold: $(head -c 300 "$scratch/hold.json")"
a_cmd="$py -m seat_console --interval 1"
c_cmd="env PYTHONPATH=$scratch/c $py -m seat_console --interval 1"
n=0
for r in $(seq "$rounds"); do
  for which in A C C A; do
    n=$((n + 1)); cmd=$a_cmd; [ "$which" = C ] && cmd=$c_cmd
    $py benchmarks/bench_vs_nvitop.py --order A --seconds "$secs" --warmup 8 \
      --seat-cmd "$cmd" --json "$scratch/s$n.json" >/dev/null 2>&1
    $py - "$scratch/s$n.json" "$which" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["runs"][0]
print(json.dumps({"which": sys.argv[2], **{k: r.get(k) for k in (
    "first_gpu_frame_s", "first_full_screen_s", "rss_mib", "rss_max_mib",
    "cpu_pct_of_one_core")}}))
PY
  done
done | tee "$out/sessions.jsonl"
exec 9>&-
echo "== $(date -u +%FT%TZ) done"
