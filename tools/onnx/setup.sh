#!/usr/bin/env bash
# Creates tools/onnx/.venv with the pinned onnx and onnxruntime (requirements.txt): the wheel
# whose node tests (onnx/backend/test/data/node/*) tests/onnx/run_node_tests.ts runs, and the
# reference runtime (tools/pinned_venv.sh; idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/../pinned_venv.sh" "$here" onnx \
  "import onnx, onnxruntime; print('onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__, 'in tools/onnx/.venv')"
