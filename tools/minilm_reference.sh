#!/usr/bin/env bash
# Computes the reference of tests/minilm_test.ts once, with all-MiniLM-L6-v2's own stack
# (sentence-transformers on PyTorch, pinned in minilm_reference_requirements.txt) in a
# git-ignored venv: writes testdata/minilm/reference.json (sentences, token ids) and
# embeddings.bin (float32), and the model as ONNX for bench/minilm_bench.ts
# (.weights/all-MiniLM-L6-v2/model.onnx). Not part of CI: the outputs under testdata/
# are committed. Needs ~7 GB of disk for the venv (torch's CUDA wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv/reference
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/pip" install -q -r tools/minilm_reference_requirements.txt
"$VENV/bin/python" tools/minilm_reference.py "$@"
