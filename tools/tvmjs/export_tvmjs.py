"""Builds a model of the relaxvm TVM packages for TVM's own web runtime (tvmjs).

Usage (from the repository root, after `bash tools/tvmjs/build.sh`):

    TVM_HOME=.tvmjs/tvm tools/tvm/.venv/bin/python tools/tvmjs/export_tvmjs.py MODEL OUT_DIR

MODEL is one of tools/tvm/export_webgpu.py's MODELS (mlp, encoder, mlp_bench, encoder_bench, ...)
or `llama` (tools/tvm/llama_module.py's tiny Llama). The module is the one export_webgpu.py
builds; here it goes through relax.build for Target("webgpu", host={"kind": "llvm", "mtriple":
"wasm32-unknown-unknown-wasm"}) and export_library with tvm.contrib.tvmjs.create_tvmjs_wasm
(handed wasm objects, not bitcode: see create_tvmjs_wasm_from_objects), which links the host code
with tvmjs's runtime (TVM_HOME/web/dist/wasm/*.bc) into one WebAssembly file that tvmjs's
`instantiate` loads; the WGSL kernels ride inside it. A link takes minutes (LTO of the runtime).

Writes OUT_DIR/model.wasm and OUT_DIR/kernels.json (the WebGPU module's `func_info` and its whole
WGSL source), so that a caller can check the kernels are those of the relaxvm package
(export_webgpu.py builds the same module for Target("webgpu", host="llvm")). No weights: the
bench feeds both runtimes the relaxvm package's tensor cache.
"""

import json
import os
import sys

import tvm
from tvm import relax
from tvm.contrib import tvmjs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tvm"))
from export_webgpu import MODELS  # noqa: E402

WASM_HOST = {"kind": "llvm", "mtriple": "wasm32-unknown-unknown-wasm"}


def module_of(model, target):
    if model == "llama":
        from llama_module import LlamaConfig, llama_module

        mod, _ = llama_module(LlamaConfig(), target)
        return mod
    factory, spec, _ = MODELS[model]
    mod, _ = factory().export_tvm({"forward": spec})
    return mod


def create_tvmjs_wasm_from_objects(output, objects, options=None):
    """tvmjs.create_tvmjs_wasm, handed wasm object files instead of LLVM bitcode.

    create_tvmjs_wasm asks export_library for bitcode (`object_format = "bc"`), which emcc's
    wasm-ld links by LTO with its own LLVM. The wheel's LLVM is 22, Debian's emscripten 3.1.6 runs
    LLVM 14, and LLVM 14 cannot read LLVM 22's bitcode ("Opaque pointers are only supported in
    -opaque-pointers mode (Producer: 'LLVM22.1.0' Reader: 'LLVM 14.0.6')"). A wasm object file is
    LLVM-version-neutral: TVM's LLVM compiles the host code to one, wasm-ld 14 links it.
    """
    return tvmjs.create_tvmjs_wasm(output, objects, options)


create_tvmjs_wasm_from_objects.object_format = "o"


def main(model, out_dir):
    if not os.environ.get("TVM_HOME"):
        raise SystemExit("export_tvmjs.py: set TVM_HOME to tvmjs's build (.tvmjs/tvm)")
    target = tvm.target.Target("webgpu", host=WASM_HOST)
    mod = module_of(model, tvm.target.Target("webgpu"))
    ex = relax.build(mod, target=target)
    os.makedirs(out_dir, exist_ok=True)
    ex.export_library(os.path.join(out_dir, "model.wasm"), fcompile=create_tvmjs_wasm_from_objects)
    webgpu = [m for m in ex.mod.imports[0].imports if m.kind == "webgpu"]
    info = json.loads(webgpu[0].inspect_source("func_info")) if webgpu else {}
    whole = webgpu[0].inspect_source() if webgpu else ""
    with open(os.path.join(out_dir, "kernels.json"), "w") as f:
        json.dump({"tvm": tvm.__version__, "target": str(target), "func_info": info,
                   "source": whole}, f, indent=1)
    print(f"{model}: {len(info)} kernels, {os.path.getsize(os.path.join(out_dir, 'model.wasm'))} "
          f"bytes of wasm -> {out_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or (sys.argv[1] not in MODELS and sys.argv[1] != "llama"):
        raise SystemExit(f"usage: export_tvmjs.py {{{','.join([*MODELS, 'llama'])}}} OUT_DIR")
    main(sys.argv[1], sys.argv[2])
