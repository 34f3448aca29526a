#!/usr/bin/env bash
# One device call: seat-console beside nvitop on the GPU machine, and its GPU panel against
# nvidia-smi, with a process holding most of card 0's memory the whole time.
#
#   bash benchmarks/device_vs_nvitop.sh OUT_DIR [SECONDS]
#
# Steps: install the project, nvitop 1.7.2 and py-spy from .wheels/ (no package index there;
# docs/benchmarks.md says how to fill it), compile their .pyc (so the first session does not
# pay for it), hold HOLD_FRACTION (0.70) of card 0's memory with torch (scripts/gpu_hold.py),
# nvidia-smi's memory.used/total/reserved, the TUI's GPU panel against nvidia-smi
# (benchmarks/panel_vs_smi.py), seat-console vs nvitop A/B/B/A in a 120x40 pty at 1 s
# (benchmarks/bench_vs_nvitop.py, SECONDS per window, default 60), four short sessions A/B/B/A
# for more start-up samples, the panel check again, then the hold is released.
#
# Writes at most 7 files, all directly in OUT_DIR (the device returns 8 files, 2 folders deep):
# device.log (everything printed), nvidia-smi.csv, panel_vs_smi.json, vs_nvitop.json,
# first_frames.json, panel_vs_smi_end.json, pyspy.txt (only with PROFILE_S).
#
# Environment: PY (interpreter, default python3); HOLD_FRACTION; ORDER (default ABBA) and
# SHORT_ORDER (the short sessions', default ABBA);
# PROFILE_S (py-spy seconds after the sessions, default 0: none); EXTRAS=1 also runs
# import_cost.py and rss_breakdown.py into the log. NVML_DOUBLE=1 rehearses the same steps on
# a machine without a GPU: the console and the panel check read the NVML double
# (benchmarks/nvml_double_console.py), SMI names a stand-in for nvidia-smi, nothing is held,
# NVITOP_CMD replaces nvitop (which needs a real NVML; give a stand-in, or ORDER and
# SHORT_ORDER without B), and INSTALL=0 skips the install.
set -u
out=${1:?usage: device_vs_nvitop.sh OUT_DIR [SECONDS]}
secs=${2:-60}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PY:-python3}
smi=${SMI:-nvidia-smi}
order=${ORDER:-ABBA}
scratch=$(mktemp -d)
export PYTHONUNBUFFERED=1
exec > >(tee -a "$out/device.log") 2>&1
echo "== $(date -u +%FT%TZ) device_vs_nvitop: $(nproc) cores, $($py --version 2>&1), $(uname -r)"

if [ "${INSTALL:-1}" = 1 ]; then
  t0=$(date +%s)
  if ! $py -m pip install -q --no-index --find-links .wheels --no-build-isolation -e . \
      >"$scratch/install.log" 2>&1; then
    echo "full install failed (a dependency missing from .wheels?); installing every wheel there"
    tail -5 "$scratch/install.log"
    $py -m pip install -q --no-index --no-deps .wheels/*.whl >>"$scratch/install.log" 2>&1
    $py -m pip install -q --no-index --no-deps --no-build-isolation -e . \
      >>"$scratch/install.log" 2>&1 || { echo "install failed"; tail -20 "$scratch/install.log"; exit 2; }
  fi
  $py -m pip install -q --no-index --find-links .wheels nvitop==1.7.2 py-spy \
    >>"$scratch/install.log" 2>&1 || { echo "nvitop/py-spy install failed"; tail -20 "$scratch/install.log"; }
  echo "install: $(( $(date +%s) - t0 )) s"
fi
$py -m compileall -q -j 0 console widgets actions benchmarks >/dev/null 2>&1
$py -c "import seat_console.cli, seat_console.tui.app, textual, pydantic; print('imports ok')" || exit 2
$py -m pip list 2>/dev/null | grep -iE "^(textual|rich|pydantic|nvitop|nvidia-ml-py|psutil|py-spy|seat-console) " \
  | tr -s ' ' | paste -sd ';'

seat_cmd="$py -m seat_console --interval 1"
panel_args=()
if [ "${NVML_DOUBLE:-0}" = 1 ]; then
  echo "REHEARSAL: the NVML double stands for the card, $smi for nvidia-smi; nothing is held"
  seat_cmd="$py benchmarks/nvml_double_console.py -- --interval 1"
  panel_args=(--nvml-double)
  nvitop_cmd=${NVITOP_CMD:?NVML_DOUBLE=1 needs NVITOP_CMD (nvitop needs a real NVML)}
else
  nvitop_cmd=${NVITOP_CMD:-nvitop -m full --interval 1}
  command -v nvitop >/dev/null || nvitop_cmd="$py -m nvitop -m full --interval 1"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.reserved,memory.used \
    --format=csv
  total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
  gib=$($py -c "print(int(${HOLD_FRACTION:-0.70} * $total_mib / 1024))")
  mkfifo "$scratch/hold_in"
  $py scripts/gpu_hold.py --gib "$gib" <"$scratch/hold_in" >"$scratch/hold.json" 2>"$scratch/hold.err" &
  hold_pid=$!
  exec 9>"$scratch/hold_in"   # the hold lasts until this is closed
  for _ in $(seq 90); do [ -s "$scratch/hold.json" ] && break; sleep 1; done
  echo "hold ($gib GiB of $total_mib MiB): $(cat "$scratch/hold.json")"
  [ -s "$scratch/hold.json" ] || { echo "the hold did not start:"; tail -5 "$scratch/hold.err"; }
fi
echo "seat-console: $seat_cmd"
echo "nvitop:       $nvitop_cmd"

{ $smi --query-gpu=index,memory.used,memory.total,memory.reserved --format=csv
  [ "${NVML_DOUBLE:-0}" = 1 ] || nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} >"$out/nvidia-smi.csv" 2>&1
cat "$out/nvidia-smi.csv"

echo "== panel vs nvidia-smi (before)"
$py benchmarks/panel_vs_smi.py "${panel_args[@]}" --smi "$smi" --json "$out/panel_vs_smi.json"
echo "panel_vs_smi rc $?"

echo "== A/B/B/A, ${secs} s windows (A = seat-console, B = nvitop)"
$py benchmarks/bench_vs_nvitop.py --order "$order" --seconds "$secs" --warmup 5 \
  --seat-cmd "$seat_cmd" --nvitop-cmd "$nvitop_cmd" --json "$out/vs_nvitop.json"

echo "== start-up: short sessions ${SHORT_ORDER:-ABBA}"
$py benchmarks/bench_vs_nvitop.py --order "${SHORT_ORDER:-ABBA}" --seconds 2 --warmup 3 \
  --seat-cmd "$seat_cmd" --nvitop-cmd "$nvitop_cmd" --json "$out/first_frames.json"

if [ "${PROFILE_S:-0}" != 0 ]; then
  echo "== py-spy ${PROFILE_S} s"
  $py benchmarks/bench_vs_nvitop.py --order "" --profile "$PROFILE_S" --seat-cmd "$seat_cmd" \
    --nvitop-cmd "$nvitop_cmd" --json "$scratch/profile.json"
  cp "$scratch/pyspy-seat-console.txt" "$out/pyspy.txt" 2>/dev/null
fi
if [ "${EXTRAS:-0}" = 1 ]; then
  $py benchmarks/import_cost.py --profile default
  $py benchmarks/rss_breakdown.py --seconds 15 -- $seat_cmd
fi

echo "== panel vs nvidia-smi (end, the hold still there)"
$py benchmarks/panel_vs_smi.py "${panel_args[@]}" --smi "$smi" --json "$out/panel_vs_smi_end.json"
echo "panel_vs_smi rc $?"
$smi --query-gpu=index,memory.used,memory.total,memory.reserved --format=csv,noheader

if [ -n "${hold_pid:-}" ]; then
  exec 9>&-
  wait "$hold_pid"
  echo "hold released (rc $?)"
fi
rm -rf "$scratch"
echo "== $(date -u +%FT%TZ) done"
