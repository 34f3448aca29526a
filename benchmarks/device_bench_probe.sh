#!/usr/bin/env bash
# Issue 21's stream-server sweep (benchmarks/bench_probe.py) on the GPU machine's CPUs.
#
# Why there: on the 2-core lab VM `vllm bench serve` fills 0.96-0.995 of its one core at 50k tok/s,
# so its tok/s there measures its own CPU, not the server's pace. The GPU machine has 16 cores:
# the stream server, `bench serve` and the probe each get a core of their own (--server-cpu,
# --client-cpu), nothing else runs, and no engine competes for the cores.
#
# That machine has no vLLM and reaches no package index, so the run carries (git-ignored, named in
# the device call's `carry`; benchmarks/device_bench_probe_carry.sh makes them here; the run of
# record is in docs/benchmarks.md, "on the GPU machine's 16 cores"):
#   .devprobe/whl/           cp312 wheels: the probe's needs (pydantic, httptools, httpx-sse, ...)
#                            and what `import vllm.benchmarks.serve` needs beyond that machine's
#                            own packages (msgspec, pyzmq, openai, xgrammar, ...), the lab
#                            venv's versions
#   .devprobe/vllm-py.tar.gz vLLM 0.32.0's Python files from the lab venv: `bench serve` is
#                            Python over aiohttp (vllm/benchmarks/serve.py,
#                            lib/endpoint_request_func.py); no compiled op is imported
#   .devprobe/model/         the lab model's tokenizer (bench serve counts tokens with it)
#   .devprobe/profile.toml   the lab profile (the probe's settings come from it), its paths
#                            rewritten (none is opened but the backport's patched file, which
#                            the profile's validation checks: @DEVPROBE@/issue)
#   .devprobe/issue          that file
# Usage (repo root on that machine):  BENCH_GIT_HEAD=<commit> benchmarks/device_bench_probe.sh \
#   check|start|wait ARGS...
#   check  install, import both clients, print the machine (lscpu, cgroups), one short rate
#   start  the sweep (bench_probe.py ARGS) in its own session, so it outlives this call: its
#          log is /tmp/bench-probe.log, its JSON /tmp/bench-probe.json
#   wait   wait up to WAIT_S (default 540) for it, then copy log and JSON to $OUT
set -euo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
D=.devprobe
SITE=/tmp/site
PY="${PY:-python3}"
LOG=/tmp/bench-probe.log
JSON=/tmp/bench-probe.json
what="${1:?check, start or wait}"
shift
if [ ! -e "$SITE/seat_console" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$D"/whl/*.whl
  tar -xzf "$D/vllm-py.tar.gz" -C "$SITE"
  ln -sfn "$PWD/console" "$SITE/seat_console"
fi
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
STATE=/tmp/bench-state.json
sed "s#@DEVPROBE@#$PWD/$D#g" "$D/profile.toml" > /tmp/bench-profile.toml
"$PY" - "$STATE" "$PWD" "$(command -v "$PY")" <<'EOF'
import json, sys
state, root, py = sys.argv[1:4]
json.dump({"vllm": {"url": "http://127.0.0.1:9", "served_model_name": "seat-resident",
                    "python": py, "model_dir": f"{root}/.devprobe/model"},
           "profile": "/tmp/bench-profile.toml"}, open(state, "w"))
EOF
case "$what" in
  check)
    { nproc; lscpu | grep -E "Model name|^CPU\(s\)|MHz|NUMA node\(s\)"; "$PY" --version
      uptime || true
      echo "cgroup v1 cpu: $([ -w /sys/fs/cgroup/cpu ] && echo writable || echo absent)"
      echo "cgroup v2: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null || echo absent)"
    } 2>&1 | tee "$OUT/machine.txt"
    "$PY" -c "import time; t = time.perf_counter()
import vllm.benchmarks.serve, vllm.benchmarks.datasets.datasets, seat_console.probe.run
import aiohttp, pydantic, transformers
print('imports ok in', round(time.perf_counter() - t, 2), 's; aiohttp', aiohttp.__version__,
      'pydantic', pydantic.VERSION, 'transformers', transformers.__version__)" 2>&1 \
      | grep -v "No CUDA runtime" | tee -a "$OUT/machine.txt"
    "$PY" benchmarks/bench_probe.py --state "$STATE" "$@" --json "$OUT/check.json" 2>&1 \
      | tee "$OUT/check.log"
    ;;
  start)
    rm -f "$LOG" "$JSON"
    setsid nohup "$PY" benchmarks/bench_probe.py --state "$STATE" "$@" --json "$JSON" \
      > "$LOG" 2>&1 < /dev/null &
    echo "started pid $!; log $LOG"
    ;;
  wait)
    deadline=$(( $(date +%s) + ${WAIT_S:-540} ))
    while [ ! -s "$JSON" ] && pgrep -f "bench_probe.py --state" > /dev/null \
        && [ "$(date +%s)" -lt "$deadline" ]; do
      sleep 5
    done
    cp "$LOG" "$OUT/bench-probe.log" 2>/dev/null || true
    if [ -s "$JSON" ]; then cp "$JSON" "$OUT/bench-probe.json"; echo "done"; else
      echo "still running: $(wc -l < "$LOG") lines"; tail -3 "$LOG"; fi
    ;;
  *) echo "usage: $0 check|start|wait ARGS..." >&2; exit 2 ;;
esac
