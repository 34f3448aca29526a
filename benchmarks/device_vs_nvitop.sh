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
  echo "full install failed (a dependency missing from .wheels?); installing every wheel there"
  tail -3 "$out/install.log"
  $py -m pip install -q --no-index --no-deps .wheels/*.whl >>"$out/install.log" 2>&1
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
$py -X importtime -c "import seat_console.cli, seat_console.tui.app, seat_console.sources.gpu" 2>"$out/importtime.txt"
tail -1 "$out/importtime.txt"
# how long the driver's start-up takes (what the early GPU reading overlaps with the imports)
$py -c "import time; t=time.perf_counter(); import pynvml; t1=time.perf_counter(); pynvml.nvmlInit(); t2=time.perf_counter(); h=pynvml.nvmlDeviceGetHandleByIndex(0); pynvml.nvmlDeviceGetMemoryInfo(h); t3=time.perf_counter(); print(f'import pynvml {t1-t:.4f} s, nvmlInit {t2-t1:.4f} s, first handle+memory {t3-t2:.4f} s')" | tee "$out/nvml_init.txt"
$py benchmarks/import_cost.py --profile default --json "$out/import_cost.json" | tee "$out/import_cost.txt"
$py benchmarks/rss_breakdown.py --seconds 15 --json "$out/rss_breakdown.json" -- $py -m seat_console --interval 1 | tee "$out/rss_breakdown.txt"
MALLOC_ARENA_MAX=2 $py benchmarks/rss_breakdown.py --seconds 15 --json "$out/rss_breakdown_arena2.json" -- $py -m seat_console --interval 1 | head -3 | tee "$out/rss_breakdown_arena2.txt"
$py benchmarks/bench_vs_nvitop.py --seconds "$secs" --json "$out/vs_nvitop.json" \
  --profile "${PROFILE_S:-45}" 2>&1 | tee "$out/vs_nvitop.log"
if [ -n "${CAPTURE_S:-}" ]; then   # what the idle console still writes, after 20 s
  $py benchmarks/capture_tty.py "$CAPTURE_S" 20 >"$out/capture.txt" 2>&1
  head -c 3000 "$out/capture.txt"
fi
exec 9>&-
wait
rm -f "$out/.hold_in"
