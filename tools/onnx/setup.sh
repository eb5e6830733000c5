#!/usr/bin/env bash
# Creates tools/onnx/.venv with the pinned onnx and onnxruntime (requirements.txt): the wheel
# whose node tests (onnx/backend/test/data/node/*) tests/onnx/run_node_tests.ts runs, and the
# reference runtime. Idempotent: a venv that already holds exactly these versions is left alone.
# Python is a development and test dependency only; the importer stays TypeScript.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$here/requirements.txt"; then
  echo "tools/onnx/.venv is up to date ($(grep -m1 '^onnx==' "$here/requirements.txt"))"
  exit 0
fi
if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
  # Debian's python3 makes venvs only with python3-venv (ensurepip) installed.
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    rm -rf "$venv"
    "$python" -m venv "$venv"
  else
    echo "tools/onnx/setup.sh: '$python -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  -r "$here/requirements.txt"
"$venv/bin/python" -c "import onnx, onnxruntime; print('onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__, 'in tools/onnx/.venv')"
cp "$here/requirements.txt" "$stamp"
