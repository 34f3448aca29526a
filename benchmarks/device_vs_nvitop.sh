#!/usr/bin/env bash
# One device call: install from .wheels, hold 100 GiB on GPU 0 (a process exists, as an
# engineer's seat has), then seat-console vs nvitop A/B/B/A in a 120x40 pty with py-spy after.
#   bash benchmarks/device_vs_nvitop.sh OUT_DIR [SECONDS]
# Needs .wheels/ with textual, pydantic, docker, tenacity, platformdirs, nvitop 1.7.2, py-spy
# (docs/benchmarks.md says how to fill it). Writes OUT_DIR/vs_nvitop.json, importtime.txt, logs.
set -u
out=${1:?usage: device_vs_nvitop.sh OUT_DIR [SECONDS]}
secs=${2:-60}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
py=python3
if ! $py -m pip install -q --no-index --find-links .wheels --no-build-isolation -e . >"$out/install.log" 2>&1; then
  echo "full install failed (a dependency missing from .wheels?); installing the UI's own"
  tail -3 "$out/install.log"
  $py -m pip install -q --no-index --find-links .wheels textual pydantic docker tenacity \
    platformdirs >>"$out/install.log" 2>&1
  $py -m pip install -q --no-deps --no-build-isolation -e . >>"$out/install.log" 2>&1 \
    || { echo "install failed"; tail -20 "$out/install.log"; exit 2; }
fi
$py -m pip install -q --no-index --find-links .wheels nvitop==1.7.2 py-spy >>"$out/install.log" 2>&1 \
  || { echo "nvitop/py-spy install failed"; tail -20 "$out/install.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$out/nvidia-smi.txt"
mkfifo "$out/.hold_in"
$py scripts/gpu_hold.py --gib 100 <"$out/.hold_in" >"$out/hold.json" 2>"$out/hold.err" &
exec 9>"$out/.hold_in"   # keep the hold's stdin open until the end
for _ in $(seq 60); do [ -s "$out/hold.json" ] && break; sleep 1; done
cat "$out/hold.json"
$py -X importtime -c "import seat_console.cli, seat_console.app, seat_console.sources.gpu" 2>"$out/importtime.txt"
tail -1 "$out/importtime.txt"
$py benchmarks/bench_vs_nvitop.py --seconds "$secs" --json "$out/vs_nvitop.json" \
  --profile "${PROFILE_S:-45}" 2>&1 | tee "$out/vs_nvitop.log"
if [ -n "${CAPTURE_S:-}" ]; then   # what the idle console still writes, after 20 s
  $py benchmarks/capture_tty.py "$CAPTURE_S" 20 >"$out/capture.txt" 2>&1
  head -c 3000 "$out/capture.txt"
fi
exec 9>&-
wait
rm -f "$out/.hold_in"
