"""TIR fix-ups the exporter applies to TVM 0.27's WebGPU build, where its output is wrong.

`webgpu_pipeline(target)` is TVM's own Relax pipeline for a generic GPU
(`relax.backend.gpu_generic.get_default_pipeline`) with two passes around dlight's
`ApplyDefaultSchedule`:

- before it, `UnitReductionsToSpatial`: a reduction block whose reduction axes all have extent 1
  becomes the spatial block it means (`C = init; C = C + v` is `C = init + v`). dlight's
  Fallback rule normalises such a block by dropping the unit axis, leaving a block with an
  `init` and no reduction axis, and `reverse_compute_inline` then applies the epilogue to both
  the init and the update: `out = tanh(0 + 0.5); out = tanh(out + x * y + 0.5)`, the output
  used as its own accumulator (tests/tvm_ops/expectations.ts had it as tvm-reduce-1). TVM's
  `llvm` build schedules differently and is right.
- after it, `FindInitWithoutReduction`: records any block that still has an `init` and no
  reduction axis, so `export_package` refuses the module (naming the function and block)
  instead of writing a kernel that reads its own epilogue back.

`remainders_by_division(func)` is applied to each kernel's final TIR (after TVM's device passes,
before WGSL codegen): an int32 truncated remainder of tensor values `a % b` becomes
`a - (a / b) * b`, and floordiv and floormod of them (printed with `%` by the codegen) are built
on that remainder. WGSL's `%` on i32 is exact, but Mesa's llvmpipe under Deno's wgpu computes it
as an unsigned remainder (-4 % 5 = 2; tests/tvm_ops/adapter_probe.ts shows it), while its i32 `/`
truncates as WGSL says; TVM's floor_divide and floor_mod kernels build on `%`
(tests/tvm_ops/expectations.ts had it as adapter-i32-rem). The two are the same value for every
i32 pair WGSL defines (b != 0; the one overflowing pair, INT_MIN % -1, is 0 both ways). Index
math keeps TVM's `%` (see `remainders_by_division`).
"""

import tvm
import tvm_ffi
from tvm import s_tir, tirx


def _unit(iv):
    return isinstance(iv.dom.extent, tirx.IntImm) and int(iv.dom.extent) == 1


def _init_stores(stmt):
    """The stores of a block's `init`, or None when it is anything but stores."""
    if isinstance(stmt, tirx.stmt.BufferStore):
        return [stmt]
    if isinstance(stmt, tirx.SeqStmt) and all(isinstance(s, tirx.stmt.BufferStore)
                                              for s in stmt.seq):
        return list(stmt.seq)
    return None


def _spatial(block):
    """`block` as a spatial block when it reduces over unit axes only, else None.

    The update reads the accumulator where the init wrote it; over one element that read is the
    init's value, so it is substituted, the init dropped and the reduction axes made spatial
    (they index only the inputs, at their one value).
    """
    reduce = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    if block.init is None or not reduce or not all(_unit(iv) for iv in reduce):
        return None
    inits = _init_stores(block.init)
    if inits is None:
        return None

    def load(e, mutator):
        for s in inits:
            if e.source.same_as(s.buffer) and tvm_ffi.structural_equal(list(e.indices),
                                                                       list(s.indices)):
                return s.value
        return mutator.default_mutate(e)

    body = tvm_ffi.structural_mutate(block.body, [(tvm.ir.expr.TensorLoad, load)])
    iters = [tirx.IterVar(iv.dom, iv.var, tirx.IterVar.DataPar, iv.thread_tag)
             if iv.iter_type == tirx.IterVar.CommReduce else iv for iv in block.iter_vars]
    return s_tir.SBlock(iters, block.reads, block.writes, block.name_hint, body, None,
                        block.alloc_buffers, block.match_buffers, block.annotations)


@tvm.transform.module_pass(opt_level=0, name="relaxvm.UnitReductionsToSpatial")
def unit_reductions_to_spatial(mod, _ctx):
    """Every reduction over unit axes only, of every PrimFunc of `mod`, as a spatial block."""
    updates = {}
    for gv, f in mod.functions.items():
        if not isinstance(f, tirx.PrimFunc):
            continue

        def visit(block, mutator):
            block = mutator.default_mutate(block)
            return _spatial(block) or block

        body = tvm_ffi.structural_mutate(f.body, [(s_tir.SBlock, visit)])
        if not body.same_as(f.body):
            updates[gv] = f.with_body(body)
    for gv, f in updates.items():
        mod[gv] = f
    return mod


def _dtype(e):
    ty = getattr(e, "ty", None)
    return str(getattr(ty, "dtype", ty))


def _loads(e):
    """Whether expression `e` reads a buffer."""
    found = []
    tvm_ffi.structural_walk(e, [(tvm.ir.expr.TensorLoad, found.append)])
    return bool(found)


def remainders_by_division(func):
    """`func` with each i32 `%` on tensor values as division: truncmod as `a - (a / b) * b`,
    and floordiv and floormod (which TVM's WGSL codegen prints with `%`) from that remainder
    `r`, corrected by one where `r` and `b` have opposite signs. The operands, quotient and
    remainder are let-bound, as TVM's own floordiv binds `rdiv` and `rmod`.

    Only where an operand reads a tensor (floor_divide, floor_mod, remainder of values): index
    math is left as TVM wrote it. Its operands are not negative in the suite's kernels, and
    rewritten it slowed llvmpipe's compile of a conv2d kernel from 0.1 s to 5 s.
    """
    count = [0]

    def bind(value, body):  # let v = value in body(v)
        if isinstance(value, (tirx.Var, tirx.IntImm)):
            return body(value)
        count[0] += 1
        v = tirx.Var(f"relaxvm_d{count[0]}", _dtype(value))
        return tirx.Let(v, value, body(v))

    def division(e, mutator, result):
        e = mutator.default_mutate(e)
        if _dtype(e.a) not in ("int32", "int64") or not (_loads(e.a) or _loads(e.b)):
            return e
        return bind(e.a, lambda a: bind(e.b, lambda b: bind(
            tirx.Div(a, b), lambda q: bind(tirx.Sub(a, tirx.Mul(q, b)),
                                           lambda r: result(q, r, b)))))

    def opposite(r, b):  # r != 0 and sign(r) != sign(b)
        zero = tirx.IntImm(_dtype(b), 0)
        return tirx.Or(tirx.And(tirx.LT(r, zero), tirx.GT(b, zero)),
                       tirx.And(tirx.GT(r, zero), tirx.LT(b, zero)))

    def truncmod(e, mutator):
        return division(e, mutator, lambda q, r, b: r)

    def floordiv(e, mutator):
        return division(e, mutator, lambda q, r, b: tirx.Select(
            opposite(r, b), tirx.Sub(q, tirx.IntImm(_dtype(q), 1)), q))

    def floormod(e, mutator):
        return division(e, mutator, lambda q, r, b: tirx.Select(
            opposite(r, b), tirx.Add(r, b), r))

    body = tvm_ffi.structural_mutate(func.body, [(tirx.Mod, truncmod), (tirx.FloorDiv, floordiv),
                                                 (tirx.FloorMod, floormod)])
    return func if body.same_as(func.body) else func.with_body(body)


def precise_asin(func):
    """`func` with each float32 `asin(x)` as `atan2(x, sqrt((1 - x) * (1 + x)))`.

    WGSL lets asin be as inexact as atan2(x, sqrt(1 - x * x)) (4096 ULP), and Mesa's llvmpipe
    is: 3.3e-4 relative off LLVM's asinf (adapter-asin). Factoring 1 - x² keeps the
    cancellation near |x| = 1 out, and the result is within a few 1e-6 of LLVM's.
    """

    def asin(call, mutator):
        call = mutator.default_mutate(call)
        if str(call.op.name) != "tirx.call_pure_extern" or len(call.args) != 2 \
                or getattr(call.args[0], "value", None) != "asin" or _dtype(call) != "float32":
            return call
        x = call.args[1]
        one = tirx.FloatImm("float32", 1.0)
        root = tirx.call_pure_extern("float32", "sqrt",
                                     tirx.Mul(tirx.Sub(one, x), tirx.Add(one, x)))
        return tirx.call_pure_extern("float32", "atan2", x, root)

    body = tvm_ffi.structural_mutate(func.body, [(tvm.ir.expr.Call, asin)])
    return func if body.same_as(func.body) else func.with_body(body)


def init_without_reduction(mod):
    """(function, block) for each block of `mod` with an `init` and no reduction axis."""
    found = []
    for gv, f in mod.functions.items():
        if not isinstance(f, tirx.PrimFunc):
            continue

        def visit(block):
            if block.init is not None and not any(
                    iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars):
                found.append((gv.name_hint, str(block.name_hint)))

        tvm_ffi.structural_walk(f.body, [(s_tir.SBlock, visit)])
    return found


def webgpu_pipeline(target, findings):
    """TVM's generic GPU pipeline with the fix-ups; blocks `init_without_reduction` finds after
    dlight are appended to `findings` (a list), for the caller to refuse."""
    from tvm.relax.backend import gpu_generic

    @tvm.transform.module_pass(opt_level=0, name="relaxvm.FindInitWithoutReduction")
    def find(mod, _ctx):
        findings.extend(init_without_reduction(mod))
        return mod

    legalize = list(gpu_generic.legalize_passes(target))
    at = [i for i, p in enumerate(legalize) if p.info.name == "ApplyDefaultSchedule"]
    if len(at) != 1:
        raise RuntimeError(f"TVM's GPU pipeline has {len(at)} ApplyDefaultSchedule passes, not 1: "
                           f"{[p.info.name for p in legalize]}")
    legalize[at[0]:at[0] + 1] = [unit_reductions_to_spatial, legalize[at[0]], find]

    @tvm.transform.module_pass(opt_level=0, name="relaxvm.WebGPUPipeline")
    def pipeline(mod, _ctx):
        with target:
            return tvm.transform.Sequential(
                gpu_generic.library_dispatch_passes(target) + legalize
                + gpu_generic.dataflow_lower_passes(target)
                + gpu_generic.finalize_passes(target))(mod)

    return pipeline
