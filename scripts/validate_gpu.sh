#!/usr/bin/env bash
# Re-run the GPU validation (docs/validation.md) and the GPU-machine benchmarks
# (docs/benchmarks.md) on a machine with an NVIDIA GPU, torch and nvidia-smi.
#
#   scripts/validate_gpu.sh OUT_DIR [GIB]
#
# Installs the project if it (or textual/pydantic) cannot be imported: from the wheels in .wheels/ when that folder
# exists (a machine without a package index; see docs/validation.md for how to fill it), else
# from the configured package index. Then runs scripts/validate_gpu.py --screenshots --bench
# with GIB GiB (default 100) held by torch. Exit status: validate_gpu.py's (0 = all agree).
set -uo pipefail
out=${1:?usage: scripts/validate_gpu.sh OUT_DIR [GIB]}
gib=${2:-100}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
py=${PYTHON:-python3}
if ! "${PYTHON:-python3}" -c "import textual, pydantic, seat_console.sources.gpu" >/dev/null 2>&1; then
  if [ -d .wheels ]; then
    "$py" -m pip install -q --no-index --find-links .wheels --no-build-isolation -e . \
      >"$out/install.log" 2>&1 || { echo "install failed:"; tail -20 "$out/install.log"; exit 2; }
  else
    "$py" -m pip install -q -e . >"$out/install.log" 2>&1 || { tail -20 "$out/install.log"; exit 2; }
  fi
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi-L.txt"
"$py" scripts/validate_gpu.py --out "$out" --gib "$gib" --screenshots --bench
