#!/usr/bin/env bash
# Creates tools/tvm/.venv with the pinned Apache TVM (requirements.txt), the
# reference implementation relaxvm's TVM-format tests compare against
# (tools/pinned_venv.sh; idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/../pinned_venv.sh" "$here" apache-tvm \
  "import tvm; from tvm import relax; print('TVM', tvm.__version__, 'in tools/tvm/.venv')"
