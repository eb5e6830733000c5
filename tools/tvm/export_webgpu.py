"""Compiles a Relax model for WebGPU with the pinned TVM and writes a relaxvm TVM package.

    python tools/tvm/export_webgpu.py MODEL OUT_DIR      (MODEL: mlp, mlp_packed, encoder, attention4d, cumsum, sort)

A package is a directory (format "relaxvm-tvm-webgpu", version 1; the README's "Running
TVM-compiled models" and tvm/package_format.ts describe every field):

    package.json             the manifest: kernels (WGSL + TVM's launch metadata), host plans,
                             entry functions and which parameters they take
    executable.tvm           relax.build's VM executable in TVM's own format
    params/ndarray-cache.json, params/params_shard_0.bin   the weights, as tvmjs's tensor cache
    reference.json           inputs and the outputs of TVM's own CPU build (target="llvm") on them

Why launch plans. The VM calls a host function per TIR function: TVM compiles it with LLVM to
unpack the arguments, check them and launch the WGSL kernel with a grid computed from the
shapes. Captured just after SplitHostDevice (before MakePackedAPI turns them into C ABI code),
those host functions are tiny: buffer parameters with symbolic shapes, a few let-bindings and
`call_ffi_kernel(name, buffers..., scalars..., grid extents...)`; shape functions are stores of
integer arithmetic into the shape heap. This script writes them as JSON statements over a small
expression language, and refuses (naming function and construct) anything else.
"""

import base64
import json
import os
import re
import sys

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, tirx
from tvm.relax.frontend import nn

from tir_fixups import precise_asin, remainders_by_division, webgpu_pipeline
from wgsl_literals import AmbiguousLiteral, exact_float_literals, float32_values
from wgsl_scan import UnfixedScan, scan_barriers

FORMAT = "relaxvm-tvm-webgpu"
VERSION = 1


class Unsupported(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Models

class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block: self-attention and a GELU MLP, residuals around both."""

    def __init__(self, d=32, heads=4, d_ff=64):
        self.d, self.heads = d, heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, d_ff)
        self.down = nn.Linear(d_ff, d)

    def forward(self, x):  # x: (s, d)
        op = nn.op
        s = x.shape[0]
        hd = self.d // self.heads
        h = self.ln1(x)

        def split(t):  # (s, d) -> (heads, s, hd)
            return op.permute_dims(op.reshape(t, (s, self.heads, hd)), (1, 0, 2))

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        scores = op.matmul(q, op.permute_dims(k, (0, 2, 1))) * (1.0 / float(np.sqrt(hd)))
        att = op.matmul(op.softmax(scores, axis=-1), v)  # (heads, s, hd)
        att = op.reshape(op.permute_dims(att, (1, 0, 2)), (s, self.d))
        x = x + self.o(att)
        return x + self.down(op.gelu(self.up(self.ln2(x))))


class AttentionScores(nn.Module):
    """Attention scores as 4-D matmuls, `[b, h, s, d] @ [b, h, d, s]` with `b` and `s` symbolic.

    Issue 28 reported this shape returning zeros from relaxvm: dlight's kernel for it lists
    blockIdx.y before blockIdx.x and takes b, ceil(s / 32) and s as scalars.
    """

    def __init__(self, d=40, heads=5):
        self.d, self.heads = d, heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)

    def forward(self, x):  # x: (b, s, d) -> (b, heads, s, s)
        op = nn.op
        b, s = x.shape[0], x.shape[1]
        hd = self.d // self.heads
        q = op.permute_dims(op.reshape(self.q(x), (b, s, self.heads, hd)), (0, 2, 1, 3))
        k = op.permute_dims(op.reshape(self.k(x), (b, s, self.heads, hd)), (0, 2, 1, 3))
        return op.matmul(q, op.permute_dims(k, (0, 1, 3, 2)))


class Cumsum(nn.Module):
    """`nn.op.cumsum` along rows: its host code allocates a workspace (an `alloc` plan step)."""

    def forward(self, x):
        return nn.op.cumsum(x, axis=-1)


class Sort(nn.Module):
    """`nn.op.sort` along rows: its input has a symbolic element offset, its host code allocates a
    swap buffer, and its launches carry TIR's `hand_threaded` attribute."""

    def forward(self, x):
        return nn.op.sort(x, axis=-1)


MODELS = {
    # name: (module factory, input spec, sizes of the symbolic dimension in reference.json, or
    # per case a {dimension: size} dict where there are several).
    # all but the *_bench models are committed under testdata/tvm_webgpu/; the *_bench sizes
    # are exported by bench/tvm_webgpu_bench.ts into bench/.tvm_packages/ (git-ignored).
    "mlp": (lambda: MLP(), {"x": nn.spec.Tensor(["n", 16], "float32")}, [1, 3, 37]),
    "encoder": (lambda: EncoderBlock(), {"x": nn.spec.Tensor(["s", 32], "float32")}, [1, 5, 19]),
    "attention4d": (lambda: AttentionScores(), {"x": nn.spec.Tensor(["b", "s", 40], "float32")},
                    [{"b": 1, "s": 1}, {"b": 2, "s": 33}, {"b": 3, "s": 7}]),
    # The MLP with its weights as one tuple (`param_mode="packed"`, MLC LLM's layout).
    "mlp_packed": (lambda: MLP(), {"x": nn.spec.Tensor(["n", 16], "float32"),
                                   "$": {"param_mode": "packed", "effect_mode": "none"}},
                   [1, 3, 37]),
    "cumsum": (lambda: Cumsum(), {"x": nn.spec.Tensor(["m", 20], "float32")}, [1, 3, 8]),
    "sort": (lambda: Sort(), {"x": nn.spec.Tensor(["m", 37], "float32")}, [1, 3, 8]),
    "mlp_bench": (lambda: MLP(256, 1024, 256), {"x": nn.spec.Tensor(["n", 256], "float32")}, [64]),
    "encoder_bench": (lambda: EncoderBlock(256, 4, 1024),
                      {"x": nn.spec.Tensor(["s", 256], "float32")}, [64]),
}


# ---------------------------------------------------------------------------------------------
# Host functions -> launch plans

BINARY = {
    tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.FloorDiv: "floordiv",
    tirx.FloorMod: "floormod", tirx.Div: "truncdiv", tirx.Mod: "truncmod", tirx.Min: "min",
    tirx.Max: "max", tirx.EQ: "eq", tirx.NE: "ne", tirx.LT: "lt", tirx.LE: "le", tirx.GT: "gt",
    tirx.GE: "ge", tirx.And: "and", tirx.Or: "or",
    # The scans' host code computes block counts with shifts.
    tirx.RShift: "shr", tirx.LShift: "shl",
}


def dtype_of(e):
    """An expression's dtype as TVM spells it (tirx keeps it in `ty`, a PrimType)."""
    ty = getattr(e, "ty", None)
    return str(getattr(ty, "dtype", ty)) if ty is not None else str(e.dtype)


def param_of(data, params):
    """The parameter index behind a buffer's data pointer (`tirx.buffer_data(param)`), or None."""
    if type(data).__name__ == "Call" and str(data.op.name) == "tirx.buffer_data" \
            and len(data.args) == 1:
        data = data.args[0]
    # An integer variable is never a buffer, whatever its name: a symbolic size `b` and a
    # tensor parameter `b` share the name in `matmul(a, b)` with a batch dimension `b`.
    integer = type(getattr(data, "ty", None)).__name__ == "PrimType"
    for p, i in params.items():
        if p.same_as(data):
            return i
    # Identity (same_as) alone misses the copies some passes leave in buffer_data calls, so a
    # copy is matched by name, and where names repeat by type too: TVM names both outputs of
    # topk's values-and-indices `T_strided_slice` (a float32 and an int32 buffer), and the
    # scans' scratch buffers are all unnamed. One match or none: taking the first of several
    # bound one tensor where TIR meant another.
    name = getattr(data, "name", "")
    if integer or type(data).__name__ != "Var" or not name:
        return None
    named = [(p, i) for p, i in params.items() if getattr(p, "name", None) == name]
    if len(named) > 1:
        dtype = str(getattr(getattr(data, "ty", None), "dtype", None))
        named = [(p, i) for p, i in named
                 if str(getattr(getattr(p, "ty", None), "dtype", "")) == dtype]
    return named[0][1] if len(named) == 1 else None


def assert_message(s):
    """An AssertStmt's message. TVM 0.27 has two forms: `message` (a StringImm), and
    `error_kind` with `message_parts` (what tree attention's kernels carry)."""
    if hasattr(s, "message_parts"):
        parts = "".join(str(getattr(m, "value", m)) for m in s.message_parts)
        kind = "" if s.error_kind is None else str(getattr(s.error_kind, "value", s.error_kind))
        return f"{kind}: {parts}" if kind else parts
    return str(getattr(s.message, "value", s.message))


class PlanWriter:
    def __init__(self, func, name):
        self.name = name
        self.data = {}  # data var (a parameter's pointer, or scratch) -> tensor index
        self.scratch = 0  # scratch buffers allocated so far
        self.vars = set()
        self.params = []
        # As TVM's argument binder: every bare symbolic dimension binds first, so a dimension
        # such as `batch * seq` may come before the parameter that binds `batch`.
        for p in func.params:
            if isinstance(p.ty, tirx.buffer.BufferType):
                for d in [*p.ty.shape, p.ty.elem_offset]:
                    if type(d).__name__ in ("Var", "SizeVar"):
                        self.vars.add(d.name)
            else:
                self.vars.add(p.name)  # a scalar parameter (Relax passes symbolic sizes so)
        checks = []
        for i, p in enumerate(func.params):
            ty = p.ty
            if isinstance(ty, tirx.buffer.BufferType):
                if ty.strides is not None and len(ty.strides) > 0:
                    raise Unsupported(f"{name}: parameter {p.name} has strides")
                self.data[p] = i
                param = {
                    "name": str(p.name), "kind": "tensor", "dtype": str(ty.dtype),
                    "shape": [self.expr(d, bind=True) for d in ty.shape],
                }
                # A symbolic element offset (TVM's paged KV cache views one pages tensor per
                # layer): the tensor starts that many elements into its buffer, the buffer is
                # bound whole and the kernel takes the offset as a scalar, as in TVM.
                offset = ty.elem_offset
                if offset is not None and not (isinstance(offset, tirx.IntImm) and int(offset) == 0):
                    param["elem_offset"] = self.expr(offset, bind=True)
                    factor = int(ty.offset_factor or 1)
                    if factor > 1:  # TVM's argument binder checks the alignment too
                        checks.append({
                            "assert": {"op": "eq", "args": [
                                {"op": "floormod", "args": [param["elem_offset"], factor]}, 0]},
                            "message": f"{p.name}: its element offset must be a multiple of "
                                       f"{factor}"})
                self.params.append(param)
            else:
                self.vars.add(p.name)
                self.params.append({"name": str(p.name), "kind": "scalar", "dtype": dtype_of(p)})
        self.body = checks + self.stmt(func.body)

    def fail(self, what):
        raise Unsupported(f"host function {self.name}: unsupported {what}")

    def expr(self, e, bind=False):
        if isinstance(e, int):
            return e
        if isinstance(e, tirx.IntImm):
            if dtype_of(e) == "bool":
                return {"op": "ne", "args": [int(e.value), 0]}
            return int(e.value)
        if isinstance(e, tirx.FloatImm):
            return {"float": float(e.value)}
        if isinstance(e, tvm.ir.expr.Var) or type(e).__name__ in ("Var", "SizeVar"):
            if param_of(e, self.data) is not None:
                return {"data": param_of(e, self.data)}
            if bind:
                self.vars.add(e.name)
            elif e.name not in self.vars:
                self.fail(f"free variable {e.name}")
            return {"var": str(e.name)}
        for cls, op in BINARY.items():
            if isinstance(e, cls):
                return {"op": op, "args": [self.expr(e.a), self.expr(e.b)]}
        if isinstance(e, tirx.Not):
            return {"op": "not", "args": [self.expr(e.a)]}
        if isinstance(e, tirx.Select):
            return {"op": "select", "args": [self.expr(e.condition), self.expr(e.true_value),
                                             self.expr(e.false_value)]}
        if isinstance(e, tirx.Cast):
            return {"op": "cast", "dtype": dtype_of(e), "args": [self.expr(e.value)]}
        if type(e).__name__ in ("BufferLoad", "TensorLoad"):
            src = e.buffer if hasattr(e, "buffer") else e.source
            src = src.data if hasattr(src, "data") else src
            if len(e.indices) != 1 or param_of(src, self.data) is None:
                self.fail(f"load {e}")
            return {"load": param_of(src, self.data), "index": self.expr(e.indices[0])}
        if type(e).__name__ == "Call" and param_of(e, self.data) is not None:
            return {"data": param_of(e, self.data)}
        self.fail(f"expression {type(e).__name__}: {e}")

    def stmt(self, s):
        out = []
        self.stmts(s, out)
        return out

    def stmts(self, s, out):
        kind = type(s).__name__
        if kind == "SeqStmt":
            for x in s.seq:
                self.stmts(x, out)
        elif kind == "DeclBuffer":
            # A flat view of a parameter (TVM's FlattenBuffer); anything else is not host code.
            if param_of(s.buffer.data, self.data) is None:
                self.fail(f"buffer {s.buffer.name} that is not a view of a parameter")
        elif kind == "Bind":
            value = self.expr(s.value)
            self.vars.add(s.var.name)
            out.append({"let": str(s.var.name), "value": value})
        elif kind in ("BufferStore", "TensorStore"):
            if len(s.indices) != 1 or param_of(s.buffer.data, self.data) is None:
                self.fail(f"store {s}")
            out.append({"store": param_of(s.buffer.data, self.data), "index": self.expr(s.indices[0]),
                        "value": self.expr(s.value)})
        elif kind == "AssertStmt":
            out.append({"assert": self.expr(s.condition), "message": assert_message(s)})
        elif kind == "AttrStmt" and str(s.attr_key) == "hand_threaded":
            # A marker left on the sort kernels' launches (their threads are bound by hand).
            self.stmts(s.body, out)
        elif kind == "AllocBuffer":
            # Scratch memory of the host function (cumsum's and the other scans' workspace): a
            # tensor the plan allocates on the device, after the parameters in `data` indices.
            b = s.buffer
            if b.scope() not in ("global", ""):
                # TVM's generic scan (cumprod) allocates its per-thread indices as "local"
                # buffers on the host and hands them to the kernel: one buffer that every
                # thread of the launch shares, where the TIR meant one per thread.
                self.fail(f"buffer {b.name or '(unnamed)'} of scope {b.scope()!r} allocated on the host "
                          "(per-thread storage in the TIR; one buffer all threads share on "
                          "the device)")
            index = len(self.params) + self.scratch
            self.scratch += 1
            key = b.data
            if type(key).__name__ == "Call" and str(key.op.name) == "tirx.buffer_data":
                key = key.args[0]
            self.data[key] = index
            out.append({"alloc": index, "dtype": str(b.dtype),
                        "shape": [self.expr(d) for d in b.shape]})
        elif kind == "For":
            if not (isinstance(s.min, tirx.IntImm) and int(s.min) == 0) or int(s.kind) != 0 \
                    or (s.step is not None and not (isinstance(s.step, tirx.IntImm)
                                                    and int(s.step) == 1)):
                self.fail(f"loop {s.loop_var} (not a serial loop from 0 by 1)")
            extent = self.expr(s.extent)
            self.vars.add(s.loop_var.name)
            out.append({"for": str(s.loop_var.name), "extent": extent, "body": self.stmt(s.body)})
        elif kind == "Return":
            # A host function that computes a value for the VM (an attention scale, RoPE's theta).
            out.append({"return": self.expr(s.value)})
        elif kind == "IfThenElse":
            out.append({"if": self.expr(s.condition), "then": self.stmt(s.then_case),
                        "else": self.stmt(s.else_case) if s.else_case is not None else []})
        elif kind == "Evaluate":
            self.evaluate(s.value, out)
        else:
            self.fail(f"statement {kind}")

    def evaluate(self, call, out):
        if isinstance(call, tirx.IntImm):
            return  # T.evaluate(0): nothing
        if type(call).__name__ != "Call" or call.op.name != "tirx.call_ffi_kernel" \
                and not str(call.op.name).endswith("call_ffi_kernel"):
            self.fail(f"call {call}")
        kernel = call.args[0].value
        launch = getattr(call.attrs, "launch_params", None) if call.attrs is not None else None
        launch = None if launch is None else [str(t) for t in launch]
        if launch is None:
            self.fail(f"kernel call without launch_params: {call}")
        args = [self.expr(a) for a in call.args[1:]]
        n = len(launch)
        out.append({"launch": str(kernel), "args": args[:len(args) - n],
                    "grid": args[len(args) - n:], "grid_tags": launch})


def build_and_capture(mod, target):
    """relax.build(mod, target), keeping the TIR module as it is just before MakePackedAPI.

    One build, so the kernels and host functions are those of the executable (a second
    relax.build of the same module may fuse differently). MakePackedAPI is where TVM turns host
    functions into C-ABI code; just before it, after SplitHostDevice, they are still buffer
    parameters and kernel calls. The Relax pipeline is TVM's own with the fix-ups of
    tir_fixups.py; a kernel they cannot fix is refused (Unsupported).
    """
    captured, findings = {}, []
    original = tirx.transform.MakePackedAPI

    @tvm.transform.module_pass(opt_level=0, name="relaxvm.CaptureHostFunctions")
    def capture(m, _ctx):
        captured["mod"] = m
        return m

    tirx.transform.MakePackedAPI = lambda: tvm.transform.Sequential([capture, original()])
    try:
        ex = relax.build(mod, target=target, relax_pipeline=webgpu_pipeline(target, findings))
    finally:
        tirx.transform.MakePackedAPI = original
    for func, block in findings:
        raise Unsupported(f"TIR function {func}: block {block} has an init and no reduction axis "
                          "after dlight (its WGSL would use the output as its own accumulator)")
    return ex, captured["mod"]


def host_functions_and_kernels(lowered):
    """The host functions (as launch plans) and kernels (WGSL + func_info) of a lowered module,
    and per kernel the float32 literals of its TIR (for `exact_float_literals`)."""
    original_split = sys.modules["tvm.tirx.build"].split_host_device_mods
    host_mod, device_mods = original_split(lowered)
    from tvm.s_tir.pipeline import finalize_device_passes
    build_webgpu = tvm.get_global_func("target.build.webgpu")
    hosts, kernels, floats = {}, {}, {}
    funcs = [(gv, f) for gv, f in host_mod.functions.items()]
    for t, dm in device_mods.items():
        final = finalize_device_passes()(dm)
        for gv, f in final.functions.items():
            cc = f.attrs.get("calling_conv")
            if cc is None or int(cc) != 2:
                continue
            one = build_webgpu(tvm.IRModule({gv: f}), t)
            info = json.loads(one.inspect_source("func_info"))[gv.name_hint]
            kernels[gv.name_hint] = {
                "wgsl": one.inspect_source(),
                "arg_types": list(info["arg_types"]),
                "launch_param_tags": list(info["launch_param_tags"]),
            }
            # What the package holds: the same kernel with i32 `%` by division and a precise
            # asin (tir_fixups.py), once the build's own source is checked against `wgsl` above.
            fixed = precise_asin(remainders_by_division(f))
            kernels[gv.name_hint]["package_wgsl"] = kernels[gv.name_hint]["wgsl"] \
                if fixed.same_as(f) else build_webgpu(tvm.IRModule({gv: fixed}), t).inspect_source()
            floats[gv.name_hint] = float32_values(f)
        for gv, f in dm.functions.items():
            cc = f.attrs.get("calling_conv")
            if cc is None:
                funcs.append((gv, f))
    for gv, f in funcs:
        if not isinstance(f, tirx.PrimFunc):
            continue
        plan = PlanWriter(f, gv.name_hint)
        hosts[gv.name_hint] = {"params": plan.params, "body": canonical(plan.body)}
    return hosts, kernels, floats


# ---------------------------------------------------------------------------------------------
# Package

def loads(e):
    """The (parameter, index) pairs an expression loads from."""
    if isinstance(e, dict):
        found = [(e["load"], json.dumps(e["index"]))] if "load" in e else []
        for v in e.values():
            found += loads(v)
        return found
    if isinstance(e, list):
        return [x for v in e for x in loads(v)]
    return []


def canonical(body):
    """The plan with each run of independent stores sorted by slot.

    TVM emits a shape function's stores in an order that changes from one build to the next
    (it iterates a pointer-keyed map). Stores to constant slots that no store of the run reads
    commute, so sorting them makes the package the same every time.
    """
    out, run = [], []

    def flush():
        slots = {(s["store"], json.dumps(s["index"])) for s in run}
        independent = all(isinstance(s["index"], int) for s in run) and not any(
            load in slots for s in run for load in loads(s["value"]))
        if independent:
            run.sort(key=lambda s: (s["store"], s["index"]))
        out.extend(run)
        run.clear()

    for s in body:
        if "store" in s:
            run.append(s)
            continue
        flush()
        if "if" in s:
            s = {**s, "then": canonical(s["then"]), "else": canonical(s["else"])}
        if "for" in s:
            s = {**s, "body": canonical(s["body"])}
        out.append(s)
    flush()
    return out


def walk(body):
    """Every statement of a plan body, branches included."""
    for s in body:
        yield s
        if "if" in s:
            yield from walk(s["then"])
            yield from walk(s["else"])
        if "for" in s:
            yield from walk(s["body"])


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def entry_functions(mod, params, only=None):
    """Per Relax entry function of `mod`: how many inputs a caller passes and how the weights
    follow them, as `relax.frontend.nn`'s exporter lays them out: `param_mode="plain"` appends
    each weight as a parameter, `"packed"` one tuple of them all (`packed_params`, MLC LLM's
    layout), `"none"` nothing (MLC's `create_paged_kv_cache`)."""
    names = list(params)
    out = {}
    for gv, f in mod.functions.items():
        if not isinstance(f, relax.Function) or f.attrs is None \
                or f.attrs.get("global_symbol") is None or (only and gv.name_hint not in only):
            continue
        ps = list(f.params)
        # nn's exporter records how many parameters are inputs (`num_input`).
        n = f.attrs.get("num_input")
        n = len(ps) if n is None else int(n)
        rest = ps[n:]
        if len(rest) == 1 and rest[0].name == "packed_params" \
                and isinstance(rest[0].ty, relax.TupleType) and len(rest[0].ty.fields) == len(names):
            out[gv.name_hint] = {"inputs": n, "params": names, "param_mode": "packed"}
        elif len(rest) == len(names):
            out[gv.name_hint] = {"inputs": n, "params": names}
        elif not rest:  # param_mode="none"
            out[gv.name_hint] = {"inputs": n, "params": []}
        else:
            raise Unsupported(f"function {gv.name_hint}: its {len(rest)} parameters after the "
                              f"{n} inputs are not the {len(names)} weights, plain or packed")
    return dict(sorted(out.items()))


def reference_value(v):
    """A reference input or output as JSON: a tensor (base64), an int, a shape or a tuple."""
    if isinstance(v, np.ndarray):
        return {"shape": list(v.shape), "dtype": str(v.dtype), "base64": b64(v)}
    if isinstance(v, tvm.runtime.Tensor):
        return reference_value(v.numpy())
    if isinstance(v, (bool, int, float, np.integer, np.floating)):
        return {"scalar": v.item() if hasattr(v, "item") else v}
    if isinstance(v, ShapeInput):
        return {"shape_tuple": v.dims}
    if isinstance(v, tvm.runtime.ShapeTuple):
        return {"shape_tuple": [int(x) for x in v]}
    if isinstance(v, (tuple, list, tvm_ffi.Array)):
        return {"tuple": [reference_value(x) for x in v]}
    return {"object": type(v).__name__}  # a KV cache, say: it stays in TVM


def tvm_value(v):
    """A reference input as TVM's VM takes it."""
    if isinstance(v, np.ndarray):
        return tvm.runtime.tensor(v, tvm.cpu())
    if isinstance(v, ShapeInput):
        return tvm.runtime.ShapeTuple(v.dims)
    return v


class ShapeInput:
    """A `ShapeTuple` input of a reference case (a plain tuple would be a tuple of values)."""

    def __init__(self, *dims):
        self.dims = [int(d) for d in dims]


def export_package(mod, params, out_dir, *, function=None, functions=None, reference_inputs=(),
                   name="model", reference_mod=None):
    """Compiles Relax module `mod` for WebGPU and writes a package into `out_dir`.

    `params` maps each weight's name to a NumPy array, in the order of `mod`'s parameters (as
    `nn.Module.export_tvm` returns them). Every entry function of `mod` goes into the package
    (`functions` names a subset; `function`, one), with its weights plain, packed into one
    tuple (`param_mode="packed"`) or absent; `package.json` says which.

    Each case of `reference_inputs` is a tuple of inputs to the first function (or
    `function`), or a `(function, inputs)` pair; an input is a NumPy array, a Python int or float
    (a scalar), a `ShapeInput` (a ShapeTuple) or anything TVM's VM takes (an object made by an
    earlier case, say). The cases run in order on TVM's own CPU build (target="llvm") of
    `reference_mod` (default `mod`; a module whose kernels are chosen per target, as TVM's paged
    KV cache, must be built again for llvm), and their inputs and outputs go into reference.json.
    Raises `Unsupported` (naming the host function and construct) for host code the package
    format cannot express.
    """
    only = [function] if function else functions
    entries = entry_functions(mod, params, only)
    if not entries:
        raise Unsupported("the module has no entry function to export")
    target = tvm.target.Target("webgpu", host="llvm")
    ex, lowered = build_and_capture(mod, target)
    webgpu_mod = ex.mod.imports[0].imports[0]
    hosts, kernels, floats = host_functions_and_kernels(lowered)
    # The per-kernel sources come from a second lowering; they must be the build's own.
    whole = webgpu_mod.inspect_source()
    info = json.loads(webgpu_mod.inspect_source("func_info"))
    if set(info) != set(kernels) or sum(len(k["wgsl"]) for k in kernels.values()) != len(whole) \
            or not all(k["wgsl"] in whole for k in kernels.values()):
        raise Unsupported("the captured kernels differ from relax.build's WebGPU module")
    for kname, k in kernels.items():
        if info[kname]["arg_types"] != k["arg_types"] \
                or info[kname]["launch_param_tags"] != k["launch_param_tags"]:
            raise Unsupported(f"kernel {kname}: captured metadata differs from the build's")
    # Fixes to TVM's WGSL in the package (the executable keeps TVM's source, which relaxvm
    # does not run): i32 `%` by division (tir_fixups.py, above), float literals exact where TVM
    # printed 7 digits (wgsl_literals.py), and a barrier in each step of TVM's scan where
    # threads race (wgsl_scan.py).
    for kname, k in kernels.items():
        k["wgsl"] = k.pop("package_wgsl")
        try:
            k["wgsl"], _ = exact_float_literals(k["wgsl"], floats[kname])
            k["wgsl"], _ = scan_barriers(k["wgsl"])
        except (AmbiguousLiteral, UnfixedScan) as e:
            raise Unsupported(f"kernel {kname}: {e}") from None

    # TVM keeps TIR functions the VM never calls (reshapes it turned into vm.builtin.reshape):
    # the package holds only what the executable calls and the kernels those launch.
    called = set(re.findall(r"^@(\S+) packed_func;$", ex.as_text(), re.MULTILINE))
    hosts = {n: h for n, h in hosts.items() if n in called}
    launched = {s["launch"] for h in hosts.values() for s in walk(h["body"]) if "launch" in s}
    kernels = {n: k for n, k in kernels.items() if n in launched}

    os.makedirs(os.path.join(out_dir, "params"), exist_ok=True)
    ex.mod.write_to_file(os.path.join(out_dir, "executable.tvm"))

    # Tensor cache, as tvmjs writes it: one raw shard, records in parameter order.
    records, offset, shard = [], 0, bytearray()
    for pname, a in params.items():
        raw = np.ascontiguousarray(a).tobytes()
        records.append({"name": pname, "shape": list(a.shape), "dtype": str(a.dtype),
                        "format": "raw", "nbytes": len(raw), "byteOffset": offset})
        shard += raw
        offset += len(raw)
    with open(os.path.join(out_dir, "params", "params_shard_0.bin"), "wb") as f:
        f.write(shard)
    with open(os.path.join(out_dir, "params", "ndarray-cache.json"), "w") as f:
        json.dump({"metadata": {"ParamSize": len(records), "ParamBytes": offset},
                   "records": [{"dataPath": "params_shard_0.bin", "format": "raw-shard",
                                "nbytes": offset, "records": records}]}, f, indent=1)

    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "tvm_version": tvm.__version__,
        "model": name,
        "executable": "executable.tvm",
        "params": "params/ndarray-cache.json",
        "functions": entries,
        "kernels": dict(sorted(kernels.items())),
        "host_functions": dict(sorted(hosts.items())),
    }
    with open(os.path.join(out_dir, "package.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    # Reference: TVM's own CPU build, of the same module or of `reference_mod`.
    cpu_ex = relax.build(mod if reference_mod is None else reference_mod, target="llvm")
    vm = relax.VirtualMachine(cpu_ex, tvm.cpu())
    weights = [tvm.runtime.tensor(a, tvm.cpu()) for a in params.values()]
    cases = []
    default = function or next(iter(entries))
    for case in reference_inputs:
        fname, inputs = case if isinstance(case, tuple) and len(case) == 2 \
            and isinstance(case[0], str) else (default, case)
        entry = entries[fname]
        extra = [] if not entry["params"] else \
            [weights] if entry.get("param_mode") == "packed" else weights
        y = vm[fname](*[tvm_value(x) for x in inputs], *extra)
        out = reference_value(y)
        cases.append({"function": fname, "inputs": [reference_value(x) for x in inputs],
                      "output" if "base64" in out else "outputs": out})
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump({"reference": f"TVM {tvm.__version__} relax.build(target='llvm'), relax VM on CPU",
                   "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"{name}: {len(kernels)} kernels, {len(hosts)} host functions, "
          f"{len(entries)} functions, {offset} parameter bytes, {len(cases)} reference cases "
          f"-> {out_dir}")


def export(model, out_dir):
    """Exports one of MODELS with seeded weights and reference inputs."""
    factory, spec, sizes = MODELS[model]
    mod, named = factory().export_tvm({"forward": spec})
    rng = np.random.default_rng(23)
    params = {}
    for pname, p in named:
        shape = [int(d) for d in p.shape]
        if pname.endswith("weight") and len(shape) == 1:  # layer norm scale
            params[pname] = (1 + 0.1 * rng.standard_normal(shape)).astype(p.dtype)
        else:
            params[pname] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(p.dtype)
    (inp_spec,) = [v for k, v in spec.items() if k != "$"]
    inputs = []
    for size in sizes:
        shape = [(size[d] if isinstance(size, dict) else size) if isinstance(d, str) else int(d)
                 for d in inp_spec.shape]
        inputs.append((rng.standard_normal(shape).astype("float32"),))
    export_package(mod, params, out_dir, function="forward", reference_inputs=inputs, name=model)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        raise SystemExit(f"usage: export_webgpu.py {{{','.join(MODELS)}}} OUT_DIR")
    try:
        export(sys.argv[1], sys.argv[2])
    except Unsupported as e:
        raise SystemExit(f"export_webgpu.py: cannot export {sys.argv[1]}: {e}")
