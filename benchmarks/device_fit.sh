#!/usr/bin/env bash
# Fit budget on a real GPU machine (the team's H200): run from the repo root there.
#
# 1. The checkpoint-scan benchmark (benchmarks/bench_checkpoint_scan.py) on that machine's CPUs.
# 2. The live path: torch holds HOLD_GIB on card 0 (another process holding memory), then
#    `seat-console fit` budgets a Llama-3-8B-shaped checkpoint (sparse files) at TP 1 from the
#    live NVML total, and its pre-flight line must name the holder; nvidia-smi is captured at the
#    same moment for comparison.
# Outputs go to $OUT (or ./out): bench.txt, fit.txt, fit.json, nvidia-smi.csv.
# Needs: python3 with torch, nvidia-ml-py, psutil (present there); pydantic & co from .wheels/.
set -euo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
HOLD_GIB="${HOLD_GIB:-40}"
if ! python3 -c 'import pydantic, platformdirs' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .wheels/*.whl
  export PYTHONPATH="/tmp/site:$PWD"
else
  export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1
echo "cpus: $(nproc); $(python3 --version)" | tee "$OUT/bench.txt"
python3 benchmarks/bench_checkpoint_scan.py --repeat 7 | tee -a "$OUT/bench.txt"

WORK="$(mktemp -d)"
python3 - "$WORK/llama" <<'EOF'
import sys
sys.path.insert(0, "tests")
import ckpt_factory as F
cfg = F.llama3_8b_config()
F.write_checkpoint(__import__("pathlib").Path(sys.argv[1]),
                   F.split_even(F.llama_tensors(cfg), 4), config=cfg)
EOF
cat > "$WORK/profile.toml" <<'EOF'
[node]
name = "h200-check"
gpus = ["0"]
[seat]
tensor_parallel_size = 1
gpu_memory_utilization = 0.90
max_model_len = 8192
max_num_seqs = 64
[resident]
name = "llama3-8b-shaped"
[[silence.matchers]]
name = "instance"
value = "h200-check"
EOF
python3 - "$HOLD_GIB" "$WORK/held" <<'EOF' &
import sys, time, pathlib, torch
x = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
pathlib.Path(sys.argv[2]).write_text("ok")
time.sleep(600)
EOF
HOLDER=$!
for _ in $(seq 1 120); do [ -f "$WORK/held" ] && break; sleep 0.5; done
[ -f "$WORK/held" ] || { echo "torch did not allocate"; kill "$HOLDER"; exit 1; }
nvidia-smi --query-gpu=index,memory.total,memory.reserved,memory.used,memory.free --format=csv \
  > "$OUT/nvidia-smi.csv"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$OUT/nvidia-smi.csv"
python3 -m seat_console --profile "$WORK/profile.toml" fit --checkpoint "$WORK/llama" \
  | tee "$OUT/fit.txt"
python3 -m seat_console --profile "$WORK/profile.toml" fit --checkpoint "$WORK/llama" --json \
  > "$OUT/fit.json"
echo "holder pid: $HOLDER" | tee -a "$OUT/fit.txt"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
