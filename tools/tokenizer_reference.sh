#!/usr/bin/env bash
# Regenerates testdata/minilm/tokenizer_reference.json (tests/minilm_tokenizer_test.ts) with
# Hugging Face's `tokenizers`, pinned in tools/tokenizer_reference_requirements.txt, in a venv of
# its own (git-ignored, ~10 MB). Needs all-MiniLM-L6-v2's tokenizer.json in .weights/
# (bash tools/fetch_weights.sh). Arguments go to tools/tokenizer_reference.py (--show, --random).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv/tokenizers
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/pip" install -q --no-deps -r tools/tokenizer_reference_requirements.txt
"$VENV/bin/python" tools/tokenizer_reference.py "$@"
