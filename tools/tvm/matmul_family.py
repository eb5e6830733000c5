"""A family of `nn.op.matmul` modules, exported as relaxvm TVM packages with TVM's llvm reference.

    python tools/tvm/matmul_family.py OUT_DIR     then:  deno run -A tests/tvm/run_family.ts OUT_DIR

Batch ranks 0-2, a 2-D right-hand side broadcast over batches, batches broadcast from 1, static
and symbolic dimensions, sizes that are not multiples of dlight's tiles, extents of 1, and issue
28's attention scores (`[b, 5, s, 8] @ [b, 5, 8, s]`, which dlight launches blockIdx.y first). Each
case is a package directory OUT_DIR/<case>; OUT_DIR/index.json lists them. Reusable for other
operator families: `export_case(name, forward, spec, sizes, out_dir)`.
"""

import inspect
import json
import os
import sys

import numpy as np
from tvm.relax.frontend import nn

sys.path.insert(0, os.path.dirname(__file__))
from export_webgpu import Unsupported, export_package  # noqa: E402


def export_case(name, forward, spec, sizes, out_dir, seed=7):
    """Exports `forward` (a function of the spec's tensors) as package `out_dir/name`, with a
    reference case per entry of `sizes` (a {dimension: size} dict for the symbolic dimensions).
    Returns the index entry: the case's name and whether it exported (or why not)."""

    class Case(nn.Module):
        pass

    def method(self, *xs):
        return forward(*xs)

    # nn's exporter matches the spec to the method's parameters by name.
    P = inspect.Parameter
    method.__signature__ = inspect.Signature(
        [P("self", P.POSITIONAL_OR_KEYWORD)] + [P(n, P.POSITIONAL_OR_KEYWORD) for n in spec])
    Case.forward = method
    mod, _ = Case().export_tvm({"forward": spec})
    rng = np.random.default_rng(seed)
    cases = []
    for size in sizes:
        inputs = []
        for t in spec.values():
            shape = [size[d] if isinstance(d, str) else int(d) for d in t.shape]
            inputs.append(rng.standard_normal(shape).astype(t.dtype))
        cases.append(tuple(inputs))
    try:
        export_package(mod, {}, os.path.join(out_dir, name), function="forward",
                       reference_inputs=cases, name=name)
        return {"name": name, "exported": True}
    except Unsupported as e:
        return {"name": name, "exported": False, "reason": str(e)}


T = nn.spec.Tensor
matmul = nn.op.matmul

# name: (forward, spec, sizes)
CASES = {
    "rank0_static": (matmul, {"a": T([7, 33], "float32"), "b": T([33, 17], "float32")}, [{}]),
    "rank0_symbolic_m": (matmul, {"a": T(["m", 33], "float32"), "b": T([33, 17], "float32")},
                         [{"m": 1}, {"m": 5}, {"m": 70}]),
    "rank0_symbolic_k_n": (matmul, {"a": T([3, "k"], "float32"), "b": T(["k", "n"], "float32")},
                           [{"k": 1, "n": 1}, {"k": 40, "n": 33}]),
    "rank1_symbolic": (matmul, {"a": T(["b", "m", 9], "float32"), "b": T(["b", 9, 12], "float32")},
                       [{"b": 1, "m": 1}, {"b": 3, "m": 33}]),
    "rank2_heads_issue28": (matmul, {"q": T(["b", 5, "s", 8], "float32"),
                                     "k": T(["b", 5, 8, "s"], "float32")},
                            [{"b": 1, "s": 1}, {"b": 2, "s": 33}, {"b": 3, "s": 70}]),
    "rank2_heads_64": (matmul, {"q": T(["b", 5, "s", 64], "float32"),
                                "k": T(["b", 5, 64, "s"], "float32")},
                       [{"b": 1, "s": 7}, {"b": 2, "s": 40}]),
    "rank2_rhs_2d": (matmul, {"a": T(["b", 4, "m", 16], "float32"), "w": T([16, 24], "float32")},
                     [{"b": 1, "m": 1}, {"b": 2, "m": 35}]),
    "rank2_rhs_3d_broadcast": (matmul, {"a": T(["b", 4, "m", 16], "float32"),
                                        "w": T([4, 16, 10], "float32")},
                               [{"b": 1, "m": 3}, {"b": 3, "m": 33}]),
    "rank2_batch_from_1": (matmul, {"a": T([1, 3, "m", 8], "float32"),
                                    "b": T([2, 1, 8, "n"], "float32")},
                           [{"m": 5, "n": 7}, {"m": 33, "n": 1}]),
}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: matmul_family.py OUT_DIR")
    out = sys.argv[1]
    index = [export_case(name, *case, out) for name, case in CASES.items()]
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"family": "matmul", "cases": index}, f, indent=1)
        f.write("\n")
    print(f"{sum(c['exported'] for c in index)} of {len(index)} cases exported -> {out}")
