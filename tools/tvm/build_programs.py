"""Builds relaxvm program descriptions with Apache TVM's own ExecBuilder.

    tools/tvm/.venv/bin/python tools/tvm/build_programs.py IN.json OUT.json

IN.json is {"programs": [description, ...]} (the format is documented in
tests/tvm/description.ts, which writes it). A description may carry
"relaxvm_bytes", the hex of the file relaxvm wrote for it: TVM then also
loads those bytes, prints them and runs them ("relaxvm_loaded",
"relaxvm_as_text", ..., "relaxvm_results"); a description with only a name
and "relaxvm_bytes" is just loaded and printed.
For each program this writes what
TVM makes of it: the executable's bytes (hex), as_text(), as_python(),
stats() (or the error TVM raises: it cannot print a float constant), and the
result of each run in TVM's VM on the CPU. One Python process builds them all:
starting TVM takes about a second, a program takes well under a millisecond.

Values travel as tagged JSON lists so that nothing is rounded:
    ["int", "<decimal>"]  ["float", "<16 hex digits: the float64's bits>"]
    ["str", s]  ["shape", [int, ...]]  ["dtype", "float32"]
    ["tensor", dtype, [dims], "<hex of the bytes>"]  ["array", [value, ...]]
    ["none"]  ["closure"]  ["error", message]
"""

import json
import os
import struct
import sys
import tempfile

import ml_dtypes
import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.relax.exec_builder import VMFuncKind

LOAD_FROM_BYTES = tvm_ffi.get_global_func("ffi.Module.load_from_bytes.relax.VMExecutable")


def float_of_bits(bits_hex):
    return struct.unpack(">d", bytes.fromhex(bits_hex))[0]


def bits_of_float(value):
    return struct.pack(">d", value).hex()


def numpy_dtype(dtype):
    return np.dtype(getattr(ml_dtypes, dtype)) if hasattr(ml_dtypes, dtype) else np.dtype(dtype)


def tensor_of(dtype, shape, data_hex):
    arr = np.frombuffer(bytes.fromhex(data_hex), dtype=numpy_dtype(dtype)).reshape(shape)
    return tvm.runtime.tensor(arr, tvm.cpu())


def constant_of(desc):
    """A Python value that ExecBuilder.convert_constant turns into the described constant."""
    tag = desc[0]
    if tag == "int":
        return int(desc[1])
    if tag == "float":
        return float_of_bits(desc[1])
    if tag == "str":
        return desc[1]
    if tag == "shape":
        return tvm_ffi.Shape(desc[1])
    if tag == "dtype":
        return tvm.DataType(desc[1])
    if tag == "tensor":
        return tensor_of(desc[1], desc[2], desc[3])
    raise ValueError(f"unknown constant {desc!r}")


def operand(ib, arg):
    tag = arg[0]
    if tag == "r":
        return ib.r(arg[1])
    if tag == "imm":
        return ib.imm(int(arg[1]))
    if tag == "c":
        return ib.c(arg[1])
    if tag == "f":
        return ib.f(arg[1])
    if tag == "void":
        return ib.void_arg()
    if tag == "vm":
        return ib.vm_state()
    if tag == "const":
        return ib.convert_constant(constant_of(arg[1]))
    raise ValueError(f"unknown operand {arg!r}")


def register(ib, reg):
    if reg == "void":
        return ib.void_arg()
    if reg == "vm":
        return ib.vm_state()
    return ib.r(reg)


def build(desc):
    ib = relax.ExecBuilder()
    for item in desc["items"]:
        if item[0] == "declare":
            kind = VMFuncKind.VM_FUNC if item[2] == "vm" else VMFuncKind.PACKED_FUNC
            ib.declare_function(item[1], kind)
            continue
        _, name, num_inputs, param_names, body = item
        with ib.function(name, num_inputs=num_inputs, param_names=param_names):
            for ins in body:
                op = ins[0]
                if op == "call":
                    args = [operand(ib, a) for a in ins[2]]
                    dst = None if ins[3] is None else register(ib, ins[3])
                    ib.emit_call(ins[1], args=args, dst=dst)
                elif op == "ret":
                    ib.emit_ret(register(ib, ins[1]))
                elif op == "goto":
                    ib.emit_goto(ins[1])
                elif op == "if":
                    ib.emit_if(register(ib, ins[1]), ins[2])
                else:
                    raise ValueError(f"unknown instruction {ins!r}")
    return ib.get()


def save_bytes(ex):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "exec.bin")
        ex.mod.write_to_file(path)
        with open(path, "rb") as f:
            return f.read()


def input_of(desc):
    tag = desc[0]
    if tag == "tensor":
        return tensor_of(desc[1], desc[2], desc[3])
    if tag == "shape":
        return tvm_ffi.Shape(desc[1])
    if tag == "int":
        return int(desc[1])
    if tag == "float":
        return float_of_bits(desc[1])
    if tag == "str":
        return desc[1]
    raise ValueError(f"unknown input {desc!r}")


def value_of(v):
    """The tagged JSON form of a value a TVM VM function returned."""
    if v is None:
        return ["none"]
    if isinstance(v, bool):
        return ["int", str(int(v))]
    if isinstance(v, int):
        return ["int", str(v)]
    if isinstance(v, float):
        return ["float", bits_of_float(v)]
    if isinstance(v, tvm_ffi.dtype):  # before str: tvm_ffi.dtype is a str
        return ["dtype", str(v)]
    if isinstance(v, str):
        return ["str", str(v)]
    if isinstance(v, tvm_ffi.Shape):
        return ["shape", [int(d) for d in v]]
    if isinstance(v, tvm.runtime.Tensor):
        arr = v.numpy()
        return ["tensor", str(v.dtype), [int(d) for d in v.shape], arr.tobytes().hex()]
    if isinstance(v, (list, tuple)) or type(v).__name__ == "Array":
        return ["array", [value_of(x) for x in v]]
    if type(v).__name__ == "Function":
        return ["closure"]
    return ["other", type(v).__name__]


def run(ex, runs):
    try:
        vm = relax.VirtualMachine(ex, tvm.cpu())
    except Exception as e:  # pylint: disable=broad-except
        # TVM resolves every packed function when the VM starts: one it lacks fails them all.
        return [["error", str(e).strip().splitlines()[-1][:300]] for _ in runs]
    results = []
    for func, inputs in runs:
        try:
            results.append(value_of(vm[func](*[input_of(i) for i in inputs])))
        except Exception as e:  # pylint: disable=broad-except
            results.append(["error", str(e).strip().splitlines()[-1][:300]])
    return results


def load_relaxvm_bytes(desc, out):
    """Loads and runs the bytes relaxvm wrote for this program, as TVM would any file."""
    try:
        ex = relax.VMExecutable(LOAD_FROM_BYTES(bytes.fromhex(desc["relaxvm_bytes"])))
    except Exception as e:  # pylint: disable=broad-except
        out["relaxvm_load_error"] = str(e).strip().splitlines()[-1][:300]
        return
    out["relaxvm_loaded"] = True
    out["relaxvm_as_text"] = ex.as_text()
    out["relaxvm_as_python"] = ex.as_python()
    try:
        out["relaxvm_stats"] = ex.stats()
    except Exception as e:  # pylint: disable=broad-except
        out["relaxvm_stats_error"] = str(e).strip().splitlines()[-1][:300]
    if desc.get("runs"):
        out["relaxvm_results"] = run(ex, desc["runs"])


def describe(desc):
    out = {"name": desc.get("name")}
    if "relaxvm_bytes" in desc:
        load_relaxvm_bytes(desc, out)
    if "items" not in desc:  # only a file relaxvm wrote, for TVM to load and print
        return out
    try:
        ex = build(desc)
    except Exception as e:  # pylint: disable=broad-except
        out["build_error"] = str(e).strip().splitlines()[-1][:300]
        return out
    raw = save_bytes(ex)
    out["bytes"] = raw.hex()
    out["as_text"] = ex.as_text()
    out["as_python"] = ex.as_python()
    try:
        out["stats"] = ex.stats()
    except Exception as e:  # pylint: disable=broad-except
        out["stats_error"] = str(e).strip().splitlines()[-1][:300]
    # Run what TVM loads back from the bytes: the results are those of the file.
    try:
        loaded = relax.VMExecutable(LOAD_FROM_BYTES(raw))
    except Exception as e:  # pylint: disable=broad-except
        out["load_error"] = str(e).strip().splitlines()[-1][:300]
        return out
    if desc.get("runs"):
        out["results"] = run(loaded, desc["runs"])
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        programs = json.load(f)["programs"]
    out = {"tvm": tvm.__version__, "programs": [describe(p) for p in programs]}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
