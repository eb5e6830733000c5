"""Compiles a small MLP with TVM and writes its VM executable as a golden file.

    tools/tvm/.venv/bin/python tools/tvm/build_mlp.py testdata/tvm

The model is a two-layer MLP (4 -> 8 -> relu -> 3) with a dynamic batch
dimension, written with TVM's Relax front end (relax.frontend.nn) and built
with tvm.relax.build(mod, target="llvm"). relax.build returns a
relax.VMExecutable whose `mod` is the VM executable module (kind
"relax.VMExecutable"), importing the LLVM library that holds the TIR
kernels; `mod.write_to_file` writes the executable's bytes alone
(VMExecutable::SaveToBytes), which is what relaxvm loads.

Also writes mlp_compiled_mode.tvm, the same model built with
exec_mode="compiled" (a VM-TIR function, which relaxvm refuses by name).

Writes mlp_dynamic_batch.tvm (the bytes) and mlp_dynamic_batch.json: what TVM
prints (as_text, as_python, stats), the TIR kernels the LLVM library
implements, the parameters, and one run in TVM's VM (inputs and output as
tagged values, see build_programs.py) for whoever runs the kernels later.
"""

import json
import os
import sys

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn

sys.path.insert(0, os.path.dirname(__file__))
from build_programs import value_of  # noqa: E402  pylint: disable=wrong-import-position


class MLP(nn.Module):
    """4 -> 8 -> relu -> 3."""

    def __init__(self):
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    mod, params = MLP().export_tvm(
        spec={"forward": {"x": nn.spec.Tensor(["batch", 4], "float32")}}
    )
    ex = relax.build(mod, target="llvm")
    assert ex.mod.kind == "relax.VMExecutable", ex.mod.kind
    path = os.path.join(out_dir, "mlp_dynamic_batch.tvm")
    ex.mod.write_to_file(path)

    library = ex.mod.imports[0]
    names = [line[1:].split(" ")[0] for line in ex.as_text().splitlines() if line.startswith("@")]
    kernels = [n for n in names if library.implements_function(n)]

    rng = np.random.default_rng(17)
    inputs = [rng.standard_normal((3, 4)).astype("float32")]
    inputs += [rng.standard_normal([int(d) for d in p.shape]).astype("float32") for _, p in params]
    vm = relax.VirtualMachine(ex, tvm.cpu())
    output = vm["forward"](*[tvm.runtime.tensor(a) for a in inputs])

    info = {
        "tvm": tvm.__version__,
        "built_with": 'relax.frontend.nn MLP 4->8->relu->3, x: (batch, 4) float32, relax.build(target="llvm")',
        "as_text": ex.as_text(),
        "as_python": ex.as_python(),
        "stats": ex.stats(),
        "kernels": kernels,
        "params": [[name, [int(d) for d in p.shape], str(p.dtype)] for name, p in params],
        "run": {
            "function": "forward",
            "inputs": [value_of(tvm.runtime.tensor(a)) for a in inputs],
            "output": value_of(output),
        },
    }
    with open(os.path.join(out_dir, "mlp_dynamic_batch.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes); kernels: {', '.join(kernels)}")

    # The same model with exec_mode="compiled": its function is a VM-TIR function (kind 2),
    # compiled to machine code in the library, which relaxvm refuses by name.
    compiled = relax.build(mod, target="llvm", exec_mode="compiled")
    assert "vm_tir_func" in compiled.as_text(), compiled.as_text()
    compiled.mod.write_to_file(os.path.join(out_dir, "mlp_compiled_mode.tvm"))


if __name__ == "__main__":
    main()
