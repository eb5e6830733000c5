#!/usr/bin/env bash
# Builds TVM's own web runtime (tvmjs) from the sources of the pinned TVM, with Debian's emscripten.
#
#   bash tools/tvm/setup.sh          # once: the pinned TVM (apache-tvm 0.27.0.post1) in tools/tvm/.venv
#   apt-get install -y emscripten    # Debian 12's: emcc 3.1.6 on clang/wasm-ld 14
#   bash tools/tvmjs/build.sh        # -> .tvmjs/ (git-ignored); does nothing when it is up to date
#
# The sources are the wheel's own: apache-tvm 0.27.0.post1 (TVM commit 7b5acb32b) ships `web/`
# (Makefile, emcc/*.cc, src/*.ts), `src/runtime/` and `include/tvm/runtime`, and apache-tvm-ffi
# 0.1.15.post2 (commit e9fdc58fa) ships tvm-ffi's `src/`, `include/` and dlpack: the runtime code
# the wheel runs on the CPU. Headers the wheels lack come from TVM's repository at TVM_COMMIT (a
# local git mirror if TVM_MIRROR names one, else GitHub). The tree is laid out as TVM's repository
# is, so web/Makefile runs unchanged (-j2, niced) and tvm.support.emcc finds web/dist/wasm/*.bc
# with TVM_HOME=.tvmjs/tvm. The TypeScript (web/src) is bundled with `deno bundle` into one ES
# module, .tvmjs/tvmjs.js, in place of the Makefile's rollup. From nothing it took 11.5 minutes on
# two shared cores at load average 2-8 (half an hour at 10-13; most of it wasm-opt's asyncify pass
# in the runtime's link); run again, about a second.
#
# Output:
#   .tvmjs/tvm/                          TVM's tree (the wheel's sources) and its build:
#   .tvmjs/tvm/web/dist/wasm/*.bc        wasm_runtime, tvmjs_support, webgpu_runtime (LLVM bitcode)
#   .tvmjs/tvm/web/dist/wasm/tvmjs_runtime.{wasm,js}, web/src/tvmjs_runtime_wasi.js
#   .tvmjs/tvmjs.js                      the tvmjs library, one ES module for Deno
#   .tvmjs/tvm/SOURCES                   what it was built from
#   .tvmjs/models/                       models built for it (tools/tvmjs/export_tvmjs.py)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$ROOT/.tvmjs"
PY="$ROOT/tools/tvm/.venv/bin/python"
TVM_COMMIT=5d4dc8721307cf9677becacf0395c19be130e206
TVM_MIRROR="${TVM_MIRROR:-/work/.mirror/apache+tvm/repo}"

[ -x "$PY" ] || { echo "tools/tvmjs/build.sh: no pinned TVM; run bash tools/tvm/setup.sh first" >&2; exit 1; }
command -v emcc >/dev/null || { echo "tools/tvmjs/build.sh: no emcc; apt-get install -y emscripten" >&2; exit 1; }

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
VERSIONS="$("$PY" -c 'import tvm, tvm_ffi; print(tvm.__version__, tvm._version.commit_id, tvm_ffi.__version__, tvm_ffi._version.commit_id)')"
EMCC_VERSION="$(emcc --version 2>/dev/null | sed -n 1p)"
SOURCES="tvm+ffi: $VERSIONS; fill: $TVM_COMMIT; emcc: $EMCC_VERSION"
T="$OUT/tvm"
# Idempotent: the tree is made again (and everything built from it, models included) only when
# the wheels, the fill commit or emcc changed; make then rebuilds what is out of date.
if [ "$(cat "$T/SOURCES" 2>/dev/null)" != "$SOURCES" ]; then
rm -rf "$OUT"
mkdir -p "$T/3rdparty/tvm-ffi/3rdparty" "$T/3rdparty/compiler-rt"

# TVM's tree, from the wheels.
cp -r "$SITE/tvm/web" "$SITE/tvm/src" "$SITE/tvm/include" "$T/"
find "$T/web" -name __pycache__ -prune -exec rm -rf {} +
cp -r "$SITE/tvm_ffi/include" "$SITE/tvm_ffi/src" "$T/3rdparty/tvm-ffi/"
cp -r "$SITE/tvm_ffi/3rdparty/dlpack" "$T/3rdparty/tvm-ffi/3rdparty/"
# What the wheels lack (include/tvm/support, src/support, 3rdparty/compiler-rt/builtin_fp16.h: the
# runtime includes them) comes from TVM's repository at TVM_COMMIT, the newest main commit the
# mirror has (2026-08-22; the 0.27 release branch is not mirrored): 63 of the 73 runtime and web
# files the wheel ships are identical there. The wheel's own files are never overwritten.
FILL="include src/support 3rdparty/compiler-rt/builtin_fp16.h"
if [ -d "$TVM_MIRROR" ]; then
  git --git-dir="$TVM_MIRROR" archive "$TVM_COMMIT" $FILL | tar -x --skip-old-files -C "$T"
else
  curl -fsSL "https://codeload.github.com/apache/tvm/tar.gz/$TVM_COMMIT" \
    | tar -xz --skip-old-files --strip-components=1 -C "$T" \
      "tvm-$TVM_COMMIT/include" "tvm-$TVM_COMMIT/src/support" "tvm-$TVM_COMMIT/3rdparty/compiler-rt/builtin_fp16.h"
fi
echo "$SOURCES" > "$T/SOURCES"
fi

# The runtime: web/Makefile as TVM ships it. emcc's JavaScript optimizer needs acorn: Debian's
# node-acorn (an emscripten dependency) lives in /usr/share/nodejs, where a Node.js not from
# Debian (nodesource's, say) does not look.
# A link that failed after writing the .wasm (the JavaScript stage) leaves make thinking it is
# done: no glue, no .wasm.
[ -f "$T/web/dist/wasm/tvmjs_runtime.js" ] || rm -f "$T/web/dist/wasm/tvmjs_runtime.wasm"
(cd "$T/web" && NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}" nice make -j2 EMCC=emcc)

# The TypeScript, as one ES module. compact.ts require()s "perf_hooks" and "ws" only under Node.
deno bundle --quiet --no-config --unstable-sloppy-imports --platform deno \
  --external perf_hooks --external ws --external fs --external path --external crypto \
  -o "$OUT/tvmjs.js" "$T/web/src/index.ts"

echo "tvmjs built into $OUT: $SOURCES"
