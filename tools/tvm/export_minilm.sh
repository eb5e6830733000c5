#!/usr/bin/env bash
# Exports all-MiniLM-L6-v2 with its real weights as a TVM WebGPU package into .weights/tvm-minilm
# (git-ignored; ~90 MB), for tests/webgpu/tvm_package_suite.ts. Needs tools/tvm/.venv
# (tools/tvm/setup.sh) and the converted weights in .weights/all-MiniLM-L6-v2 (bash tools/fetch_weights.sh),
# so CI runs it after both. Without them it says so and does nothing, unless RELAXVM_REQUIRE_TVM=1
# and RELAXVM_REQUIRE_WEIGHTS=1 (CI), when it fails. Idempotent: an export made from the same
# weights, scripts and reference is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$root/tools/tvm/.venv/bin/python"
weights="$root/.weights/all-MiniLM-L6-v2"
out="$root/.weights/tvm-minilm"
reference="$root/testdata/minilm/reference.json"
if [ ! -x "$python" ] || [ ! -f "$weights/tensor-cache.json" ]; then
  msg="tools/tvm/export_minilm.sh: needs tools/tvm/.venv (bash tools/tvm/setup.sh) and $weights (bash tools/fetch_weights.sh)"
  if [ "${RELAXVM_REQUIRE_TVM:-}" = 1 ] && [ "${RELAXVM_REQUIRE_WEIGHTS:-}" = 1 ]; then
    echo "$msg" >&2
    exit 1
  fi
  echo "$msg; skipped"
  exit 0
fi
args=("$weights" "$out")
[ -f "$reference" ] && args+=("$reference")
stamp="$(cat "$weights/tensor-cache.json" "$root/tools/tvm/export_minilm.py" \
  "$root/tools/tvm/export_webgpu.py" "$root/tools/tvm/tir_fixups.py" "$root/tools/tvm/wgsl_literals.py" "$root/tools/tvm/wgsl_scan.py" "$root/tools/tvm/requirements.txt" \
  ${args[2]:+"$reference"} | sha256sum | cut -d' ' -f1)"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  echo "all-MiniLM-L6-v2 TVM package: up to date in .weights/tvm-minilm"
  exit 0
fi
rm -rf "$out"
"$python" "$root/tools/tvm/export_minilm.py" "${args[@]}" 2> >(grep -v "Fast mode segfaults" >&2)
echo "$stamp" > "$out/.stamp"
