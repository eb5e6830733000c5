"""Builds the operator suite or the random-module differential: every case a relaxvm TVM package.

    python tools/tvm/op_suite/build_suite.py OUT_DIR ops
    python tools/tvm/op_suite/build_suite.py OUT_DIR random CASES SEED

One process for the whole batch (importing TVM costs a second, a small case's two builds a few
tenths). Each case goes through `export_webgpu.export_package` (the exporter users run) into
OUT_DIR/<n>/, with TVM's `llvm` build of the same module on seeded inputs as its reference.
OUT_DIR/index.json lists every case with what became of it:

    built            a package (tests/tvm_ops/ runs it on WebGPU)
    export-refused   export_package raised Unsupported: host code a launch plan cannot express
    tvm-error        TVM itself did not build the module for WebGPU (or for llvm)
"""

import json
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import export_webgpu as ew  # noqa: E402
import cases as catalog  # noqa: E402
import random_modules  # noqa: E402


def fill(inp, binding, rng):
    """Seeded values for input `inp` with its symbols bound by `binding`."""
    shape = [binding[d] if isinstance(d, str) else d for d in inp.shape]
    kind, dtype = inp.fill, inp.dtype
    if kind == "bool" or dtype == "bool":
        return rng.integers(0, 2, shape).astype("bool")
    if kind.startswith("index:"):
        return rng.integers(0, int(kind[6:]), shape).astype(dtype)
    if kind == "int":
        a = rng.integers(-8, 9, shape)
    elif kind == "nonzero":
        a = rng.integers(1, 9, shape) * rng.choice([-1, 1], shape)
    elif kind == "positive":
        a = rng.uniform(0.1, 2.0, shape)
    elif kind == "unit":
        a = rng.uniform(-0.95, 0.95, shape)
    else:
        a = rng.standard_normal(shape)
    return a.astype(dtype)


def tvm_error_line(e):
    """The line of a TVM error that says what failed (TVM appends IR dumps and carets)."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    said = [x for x in lines if "Check failed" in x or "Error" in x] or lines[-1:] or [""]
    return f"{type(e).__name__}: {said[0]}"[:400]


def build_one(case, out_dir, rng):
    mod = catalog.module(case)
    inputs = [tuple(fill(i, b, rng) for i in case.inputs) for b in case.sizes]
    ew.export_package(mod, {}, out_dir, reference_inputs=inputs, name=case.id)


def main():
    out, suite = sys.argv[1], sys.argv[2]
    if suite == "ops":
        cases = catalog.all_cases()
        seed = 28
        if len(sys.argv) > 3:  # a substring of the ids, to rebuild a few by hand
            cases = [c for c in cases if sys.argv[3] in c.id]
    elif suite == "random":
        count, seed = int(sys.argv[3]), int(sys.argv[4])
        cases = random_modules.random_cases(count, seed)
    else:
        raise SystemExit("usage: build_suite.py OUT_DIR ops | OUT_DIR random CASES SEED")
    os.makedirs(out, exist_ok=True)
    index = []
    start = time.time()
    devnull = open(os.devnull, "w")
    for n, case in enumerate(cases):
        rng = np.random.default_rng([seed, n])
        entry = {"id": case.id, "family": case.family, "op": case.op, "class": case.shape_class,
                 "dtype": case.dtype, "dir": str(n)}
        if getattr(case, "description", None):
            entry["description"] = case.description
        t = time.time()
        saved = sys.stdout
        sys.stdout = devnull  # export_package's one-line summary, per case
        try:
            build_one(case, os.path.join(out, str(n)), rng)
            entry["status"] = "built"
        except ew.Unsupported as e:
            entry.update(status="export-refused", message=str(e))
        except Exception as e:  # TVM's own errors: TVMError, ValueError, ...
            entry.update(status="tvm-error", message=tvm_error_line(e))
            if os.environ.get("RELAXVM_OPS_TRACE"):
                traceback.print_exc()
        finally:
            sys.stdout = saved
        entry["seconds"] = round(time.time() - t, 3)
        index.append(entry)
        if (n + 1) % 50 == 0:
            print(f"{n + 1}/{len(cases)} cases, {time.time() - start:.0f} s", file=sys.stderr)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"suite": suite, "seed": seed, "tvm": ew.tvm.__version__,
                   "seconds": round(time.time() - start, 1), "cases": index}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
