#!/usr/bin/env bash
# Make .devprobe/, what benchmarks/device_bench_probe.sh carries to the GPU machine (run here, in
# the repo root, with the lab built: `python scripts/lab.py up` once made its vLLM venv).
#
# The wheels are cp312 manylinux (that machine's python is 3.12) at the versions this machine
# runs: the probe's needs at the console's, and what `import vllm.benchmarks.serve` needs
# beyond that machine's own packages at the lab venv's. The list beyond that machine's packages
# was found by importing vllm.benchmarks.serve in a python 3.12 venv holding only those packages
# and adding what each ModuleNotFoundError named (2026-12-06; a later vLLM may need more: the
# script's `check` step names it). pip reads this machine's own index configuration.
set -euo pipefail
D="${DEVPROBE_DIR:-.devprobe}"
VENV="$(python3 -c 'import json; print(json.load(open(".lab/state.json"))["vllm"]["venv"])')"
MODEL="$(python3 -c 'import json; print(json.load(open(".lab/state.json"))["vllm"]["model_dir"])')"
mkdir -p "$D/whl" "$D/model"
grep -qx "/$D/" "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null \
  || echo "/$D/" >> "$(git rev-parse --git-dir)/info/exclude"
ver() {  # NAME PYTHON: NAME==the version PYTHON has (NAME alone where it has none)
  local v
  v="$("$2" -m pip show "$1" 2>/dev/null | sed -n "s/^Version: //p")"
  echo "$1${v:+==$v}"
}
VPY="$VENV/bin/python"
LAB=(pybase64 msgspec cbor2 pyzmq openai-harmony openai sniffio cachetools xgrammar
     apache-tvm-ffi fastapi starlette partial-json-parser llguidance pydantic pydantic-core
     annotated-types typing-inspection httpx2 httpcore2 truststore tomlkit regex tqdm
     typing_extensions jiter distro)
OURS=(httptools httpx httpcore httpx-sse httpx-aiohttp orjson platformdirs google-re2 aiohttp
      uvloop multidict yarl propcache frozenlist aiosignal aiohappyeyeballs)
specs=()
for p in "${LAB[@]}"; do specs+=("$(ver "$p" "$VPY")"); done
for p in "${OURS[@]}"; do specs+=("$(ver "$p" python3)"); done
for s in "${specs[@]}"; do   # a version with no cp312 wheel (orjson 3.8.3): the newest
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_31_x86_64 --platform manylinux_2_5_x86_64 \
    --platform manylinux1_x86_64 -d "$D/whl" "$s" \
    || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
         --implementation cp --platform manylinux_2_17_x86_64 -d "$D/whl" "${s%%==*}"
done
SP="$("$VPY" -c 'import vllm, os; print(os.path.dirname(os.path.dirname(vllm.__file__)))')"
(cd "$SP" && find vllm -name '*.py' | tar -czf "$OLDPWD/$D/vllm-py.tar.gz" -T -)
cp "$MODEL"/tokenizer* "$MODEL"/config.json "$MODEL"/generation_config.json "$D/model/"
# the lab profile, its paths pointed at nothing but the backport's patched file (validated)
src="$(python3 -c 'import tomllib; print(tomllib.load(open(".lab/profile.toml", "rb"))["backport"]["files"][0]["source"])')"
cp "$src" "$D/issue"
sed -e "s#$src#@DEVPROBE@/issue#" .lab/profile.toml > "$D/profile.toml"
du -sh "$D"
