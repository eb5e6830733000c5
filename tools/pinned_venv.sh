#!/usr/bin/env bash
# Makes DIR/.venv with exactly the pins of DIR/requirements.txt, for the Python references the
# tests compare against (tools/tvm/setup.sh, tools/onnx/setup.sh). Idempotent: a venv stamped
# with the same requirements is left alone. Python is a development and test dependency only;
# the library stays TypeScript.
#
#   bash tools/pinned_venv.sh DIR MAIN_PACKAGE 'python code that imports and prints the versions'
set -euo pipefail
dir="$(cd "$1" && pwd)"
main="$2"
check="$3"
name="$(basename "$(dirname "$dir")")/$(basename "$dir")/.venv"
venv="$dir/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$dir/requirements.txt"; then
  echo "$name is up to date ($(grep -m1 "^$main==" "$dir/requirements.txt"))"
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
    echo "$name: '$python -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  -r "$dir/requirements.txt"
"$venv/bin/python" -c "$check"
cp "$dir/requirements.txt" "$stamp"
