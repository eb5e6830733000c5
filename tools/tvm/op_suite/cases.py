"""The operator suite's cases: one family per operator TVM 0.27 compiles for WebGPU.

A case is a Relax function `forward(x0, x1, ...)` of one operator (or a few that the operator
needs around it), its inputs' shapes (a string is a symbolic dimension) and dtypes, how to fill
them, and the sizes of the symbolic dimensions the reference runs at. `build_suite.py` exports
each as a relaxvm TVM package with TVM's `llvm` output on seeded inputs.

Shape classes (the README table's columns):
  static    small static shapes
  symbolic  the leading dimension symbolic, referenced at two sizes
  odd       sizes that are no multiple of a tile (dlight's 16/32/64/256)
  one       extents of 1
  large     enough rows that one launch asks for more than 65535 workgroups in x (relaxvm
            folds x into z), for row-wise kernels where that stays cheap; elementwise kernels
            would need 16M elements to fold, so they get ~10^6 instead
"""

from dataclasses import dataclass, field

from tvm import relax, tirx

R = relax.op


@dataclass
class Input:
    shape: list  # ints and symbol names
    dtype: str = "float32"
    fill: str = "normal"  # normal | positive | unit | int | nonzero | bool | index:N


@dataclass
class Case:
    family: str
    op: str
    shape_class: str
    dtype: str
    inputs: list
    fn: object  # (bb, *vars) -> Expr
    sizes: list = field(default_factory=lambda: [{}])  # one binding of the symbols per reference

    @property
    def id(self):
        return f"{self.family}/{self.op}/{self.shape_class}/{self.dtype}"


def module(case):
    """The Relax module of `case`: one function, `forward`, taking the inputs."""
    syms = {}

    def dim(d):
        if isinstance(d, str):
            return syms.setdefault(d, tirx.Var(d, "int64"))
        return d

    params = [relax.Var(f"x{i}", relax.TensorType([dim(d) for d in inp.shape], inp.dtype))
              for i, inp in enumerate(case.inputs)]
    bb = relax.BlockBuilder()
    with bb.function("forward", params):
        with bb.dataflow():
            out = bb.emit_output(case.fn(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


# ---------------------------------------------------------------------------------------------
# Shapes per class

CLASSES = ["static", "symbolic", "odd", "one", "large"]
SYM = [{"n": 3}, {"n": 17}]


def cls_shapes(rank2_static, rank2_odd, large=None):
    """(shape class, leading shape, sizes) for a row-wise operator over [rows, cols]."""
    rows, cols = rank2_static
    out = [("static", [rows, cols], [{}]), ("symbolic", ["n", cols], SYM),
           ("odd", list(rank2_odd), [{}]), ("one", [1, 1], [{}])]
    if large is not None:
        out.append(("large", list(large), [{}]))
    return out


def add(cases, family, op, cls, dtype, inputs, fn, sizes=None):
    cases.append(Case(family, op, cls, dtype, inputs, fn, sizes or [{}]))


def elementwise_shapes():
    return [("static", [4, 8], [{}]), ("symbolic", ["n", 8], SYM), ("odd", [37, 129], [{}]),
            ("one", [1, 1], [{}]), ("large", [1025, 1023], [{}])]


# ---------------------------------------------------------------------------------------------
# Families

def unary(cases):
    ops = {
        "exp": (R.exp, "normal"), "log": (R.log, "positive"), "sqrt": (R.sqrt, "positive"),
        "rsqrt": (R.rsqrt, "positive"), "tanh": (R.tanh, "normal"), "sigmoid": (R.sigmoid, "normal"),
        "sin": (R.sin, "normal"), "cos": (R.cos, "normal"), "abs": (R.abs, "normal"),
        "negative": (R.negative, "normal"), "floor": (R.floor, "normal"),
        "ceil": (R.ceil, "normal"), "round": (R.round, "normal"), "erf": (R.erf, "normal"),
        "square": (R.square, "normal"), "sign": (R.sign, "normal"),
        "relu": (R.nn.relu, "normal"), "gelu": (R.nn.gelu, "normal"),
        "silu": (R.nn.silu, "normal"), "clip": (lambda x: R.clip(x, -0.5, 0.5), "normal"),
        "asin": (R.asin, "unit"), "atan": (R.atan, "normal"),
    }
    for name, (f, fill) in ops.items():
        shapes = elementwise_shapes() if name in ("exp", "gelu") else elementwise_shapes()[:2]
        for cls, shape, sizes in shapes:
            add(cases, "unary", name, cls, "float32", [Input(shape, "float32", fill)],
                lambda bb, x, f=f: f(x), sizes)
    for name, f in {"abs": R.abs, "negative": R.negative}.items():
        for cls, shape, sizes in elementwise_shapes()[:4]:
            add(cases, "unary", name, cls, "int32", [Input(shape, "int32", "int")],
                lambda bb, x, f=f: f(x), sizes)
    for cls, shape, sizes in elementwise_shapes()[:2]:
        add(cases, "unary", "exp", cls, "float16", [Input(shape, "float16")],
            lambda bb, x: R.exp(x), sizes)


def binary(cases):
    f32 = {"add": R.add, "subtract": R.subtract, "multiply": R.multiply, "divide": R.divide,
           "maximum": R.maximum, "minimum": R.minimum, "power": R.power}
    # Broadcast forms: same shape, a row vector, a column against a row, a scalar constant.
    for name, f in f32.items():
        fill = "positive" if name == "power" else "normal"
        for cls, shape, sizes in elementwise_shapes()[:4]:
            add(cases, "binary", name, cls, "float32",
                [Input(shape, "float32", fill), Input(shape, "float32")],
                lambda bb, a, b, f=f: f(a, b), sizes)
        for cls, shape, sizes in elementwise_shapes()[:4]:
            add(cases, "binary", f"{name}-bcast-row", cls, "float32",
                [Input(shape, "float32", fill), Input([shape[-1]], "float32")],
                lambda bb, a, b, f=f: f(a, b), sizes)
    for cls, shape, sizes in elementwise_shapes():
        add(cases, "binary", "add-bcast-col-row", cls, "float32",
            [Input([shape[0], 1], "float32"), Input([1, shape[1]], "float32")],
            lambda bb, a, b: R.add(a, b), sizes)
        add(cases, "binary", "multiply-const", cls, "float32", [Input(shape, "float32")],
            lambda bb, a: R.multiply(a, relax.const(0.5, "float32")), sizes)
    ints = {"add": R.add, "multiply": R.multiply, "maximum": R.maximum,
            "floor_divide": R.floor_divide, "floor_mod": R.floor_mod, "subtract": R.subtract}
    for dtype in ("int32", "int64"):
        for name, f in ints.items():
            if dtype == "int64" and name not in ("add", "floor_divide"):
                continue
            fill = "nonzero" if name.startswith("floor") else "int"
            for cls, shape, sizes in elementwise_shapes()[:4]:
                add(cases, "binary", name, cls, dtype,
                    [Input(shape, dtype, "int"), Input([shape[-1]], dtype, fill)],
                    lambda bb, a, b, f=f: f(a, b), sizes)
    for cls, shape, sizes in elementwise_shapes()[:2]:
        add(cases, "binary", "add", cls, "float16",
            [Input(shape, "float16"), Input(shape, "float16")], lambda bb, a, b: R.add(a, b), sizes)


def compare(cases):
    cmps = {"less": R.less, "equal": R.equal, "greater_equal": R.greater_equal,
            "not_equal": R.not_equal}
    for name, f in cmps.items():
        for cls, shape, sizes in elementwise_shapes()[:4]:
            # As an int32 mask (the comparison fused into a cast), and as a bool tensor.
            add(cases, "compare", name, cls, "float32->int32",
                [Input(shape, "float32", "int"), Input([shape[-1]], "float32", "int")],
                lambda bb, a, b, f=f: R.astype(f(a, b), "int32"), sizes)
            add(cases, "compare", name, cls, "float32->bool",
                [Input(shape, "float32", "int"), Input([shape[-1]], "float32", "int")],
                lambda bb, a, b, f=f: f(a, b), sizes)
    for cls, shape, sizes in elementwise_shapes():
        add(cases, "where", "where", cls, "float32",
            [Input(shape, "float32"), Input(shape, "float32"), Input([shape[-1]], "float32")],
            lambda bb, c, a, b: R.where(R.greater(c, relax.const(0.0, "float32")), a, b), sizes)
        if cls != "large":
            add(cases, "where", "where", cls, "int32",
                [Input(shape, "int32", "int"), Input(shape, "int32", "int")],
                lambda bb, a, b: R.where(R.less(a, b), a, b), sizes)
            add(cases, "where", "where-bool-input", cls, "bool",
                [Input(shape, "bool", "bool"), Input(shape, "float32"), Input(shape, "float32")],
                lambda bb, c, a, b: R.where(c, a, b), sizes)


def reductions(cases):
    ops = {"sum": R.sum, "mean": R.mean, "max": R.max, "min": R.min, "prod": R.prod,
           "variance": R.variance}
    # Every axis form for sum and max; the others over the last axis and over (0, 2).
    every_form = [(a, k) for a in ([-1], [0], [0, 2], None) for k in (False, True)]
    shapes = [("static", [4, 6, 5], [{}]), ("symbolic", ["n", 6, 5], SYM),
              ("odd", [37, 3, 129], [{}]), ("one", [1, 1, 7], [{}])]
    for name, f in ops.items():
        for cls, shape, sizes in shapes:
            forms = every_form if name in ("sum", "max") else [([-1], True), ([0, 2], False)]
            for axis, keep in forms:
                tag = f"{name}-axis{'all' if axis is None else ','.join(map(str, axis))}" \
                      f"{'-keep' if keep else ''}"
                add(cases, "reduce", tag, cls, "float32", [Input(shape, "float32")],
                    lambda bb, x, f=f, a=axis, k=keep: f(x, a, k), sizes)
        add(cases, "reduce", f"{name}-axis-1", "large", "float32", [Input([70001, 3], "float32")],
            lambda bb, x, f=f: f(x, [-1]))
    for name, f in {"argmax": R.argmax, "argmin": R.argmin}.items():
        # TVM's argmax returns int64, which its WebGPU codegen does not take: also as int32.
        for cls, shape, sizes in shapes + [("large", [70001, 3], [{}])]:
            add(cases, "reduce", f"{name}-axis-1", cls, "float32->int32", [Input(shape)],
                lambda bb, x, f=f: R.astype(f(x, -1), "int32"), sizes)
        add(cases, "reduce", f"{name}-axis-1", "static", "float32->int64", [Input([4, 6, 5])],
            lambda bb, x, f=f: f(x, -1))
    for cls, shape, sizes in shapes:
        # Reductions over an axis of extent 1 with an epilogue: TVM 0.27's WebGPU build got the
        # mean wrong until the exporter's tools/tvm/tir_fixups.py made such reductions spatial.
        add(cases, "reduce", "sum-axis-1-exp", cls, "float32", [Input(shape[:-1] + [1])],
            lambda bb, x: R.exp(R.sum(x, [-1])), sizes)
        add(cases, "reduce", "mean-axis-1-exp", cls, "float32", [Input(shape[:-1] + [1])],
            lambda bb, x: R.exp(R.mean(x, [-1])), sizes)
        for dtype in ("int32", "int64"):
            add(cases, "reduce", "sum-axis-1", cls, dtype, [Input(shape, dtype, "int")],
                lambda bb, x: R.sum(x, [-1]), sizes)
            add(cases, "reduce", "max-axis0,2", cls, dtype, [Input(shape, dtype, "int")],
                lambda bb, x: R.max(x, [0, 2]), sizes)


def matmul(cases):
    # (tag, a shape, b shape, sizes): batch ranks 0-2 and broadcast batches.
    forms = [
        ("rank0", [8, 16], [16, 12]),
        ("rank1", [3, 8, 16], [3, 16, 12]),
        ("rank2", [2, 5, 8, 16], [2, 5, 16, 12]),
        ("bcast-b", [3, 8, 16], [16, 12]),
        ("bcast-a", [8, 16], [3, 16, 12]),
        ("bcast-1", [2, 1, 8, 16], [3, 16, 12]),
    ]
    # dlight's matmul kernels take seconds each to compile on a software adapter: every form
    # at static shapes and extents of 1, the symbolic and odd classes for a few.
    for tag, a, b in forms:
        add(cases, "matmul", tag, "static", "float32", [Input(a), Input(b)],
            lambda bb, x, y: R.matmul(x, y))
        one_a = [1] * (len(a) - 2) + [1, 16]
        one_b = [1] * (len(b) - 2) + [16, 1]
        add(cases, "matmul", tag, "one", "float32", [Input(one_a), Input(one_b)],
            lambda bb, x, y: R.matmul(x, y))
        if tag not in ("rank0", "rank2", "bcast-b"):
            continue
        # Symbolic: the rows (and, where there is a batch, the batch) of A.
        sa, sb = list(a), list(b)
        sa[-2] = "s"
        sizes = [{"s": 3}, {"s": 19}]
        if len(a) >= 3 and len(b) == len(a) and a[0] == b[0]:
            sa[0] = sb[0] = "b"
            sizes = [{"s": 3, "b": 1}, {"s": 19, "b": 2}]
        add(cases, "matmul", tag, "symbolic", "float32", [Input(sa), Input(sb)],
            lambda bb, x, y: R.matmul(x, y), sizes)
        add(cases, "matmul", tag, "odd", "float32", [Input(a[:-2] + [19, 17]),
                                                      Input(b[:-2] + [17, 21])],
            lambda bb, x, y: R.matmul(x, y))
    # The attention scores: [b, h, s, d] @ [b, h, d, s], b and s symbolic, 5 heads.
    add(cases, "matmul", "attention-scores", "symbolic", "float32",
        [Input(["b", 5, "s", 8]), Input(["b", 5, 8, "s"])], lambda bb, x, y: R.matmul(x, y),
        [{"b": 1, "s": 3}, {"b": 2, "s": 19}])
    # ... scaled, with K transposed first, as an attention layer writes it.
    add(cases, "matmul", "attention-scaled", "symbolic", "float32",
        [Input(["b", 5, "s", 16]), Input(["b", 5, "s", 16])],
        lambda bb, q, k: R.multiply(R.matmul(q, bb.emit(R.permute_dims(k, [0, 1, 3, 2]))),
                                    relax.const(0.25, "float32")),
        [{"b": 1, "s": 7}, {"b": 2, "s": 33}])
    # A reduction over an axis of extent 1 with an epilogue whose value at 0 is not 0 (TVM 0.27's
    # WebGPU build used the output as its own accumulator; tools/tvm/tir_fixups.py fixes it).
    add(cases, "matmul", "k1-tanh", "one", "float32", [Input([5, 1]), Input([1, 1])],
        lambda bb, x, y: R.tanh(R.add(R.matmul(x, y), relax.const(0.5, "float32"))))
    add(cases, "matmul", "k1-tanh", "symbolic", "float32", [Input(["n", 1]), Input([1, 3])],
        lambda bb, x, y: R.tanh(R.add(R.matmul(x, y), relax.const(0.5, "float32"))), SYM)
    add(cases, "matmul", "gemv-rows", "large", "float32", [Input([70001, 4]), Input([4, 1])],
        lambda bb, x, y: R.matmul(x, y))
    for dtype in ("int32",):
        add(cases, "matmul", "rank0", "static", dtype, [Input([8, 16], dtype, "int"),
                                                         Input([16, 12], dtype, "int")],
            lambda bb, x, y: R.matmul(x, y))
    add(cases, "matmul", "rank0", "static", "float16",
        [Input([8, 16], "float16"), Input([16, 12], "float16")], lambda bb, x, y: R.matmul(x, y))


def layout(cases):
    shapes = [("static", [2, 3, 4], [{}]), ("symbolic", ["n", 3, 4], SYM),
              ("odd", [37, 3, 129], [{}]), ("one", [1, 1, 1], [{}])]
    for cls, shape, sizes in shapes:
        for dtype, fill in (("float32", "normal"), ("int32", "int"), ("int64", "int")):
            add(cases, "permute_dims", "permute-2,0,1", cls, dtype, [Input(shape, dtype, fill)],
                lambda bb, x: R.permute_dims(x, [2, 0, 1]), sizes)
        n = shape[0]
        add(cases, "reshape", "reshape-flatten", cls, "float32", [Input(shape)],
            lambda bb, x: R.reshape(x, [x.ty.shape[0], -1]), sizes)
        # A reshape that the VM cannot do as a view: it follows a permute.
        add(cases, "reshape", "permute-reshape", cls, "float32", [Input(shape)],
            lambda bb, x: R.reshape(bb.emit(R.permute_dims(x, [0, 2, 1])), [x.ty.shape[0], -1]),
            sizes)
        add(cases, "split", "split-2-axis2", cls, "float32",
            [Input(shape[:2] + [shape[2] * 2])],
            lambda bb, x: concat_parts(bb, x, 2, 2), sizes)
        add(cases, "split", "split-at-axis1", cls, "float32", [Input(shape[:1] + [5] + shape[2:])],
            lambda bb, x: concat_parts(bb, x, [2], 1), sizes)
        add(cases, "concat", "concat-axis1", cls, "float32",
            [Input(shape), Input(shape[:1] + [2] + shape[2:])],
            lambda bb, a, b: R.concat([a, b], 1), sizes)
        add(cases, "concat", "concat-axis0", cls, "float32", [Input(shape), Input(shape)],
            lambda bb, a, b: R.concat([a, b], 0), sizes)
        add(cases, "strided_slice", "slice-step2", cls, "float32", [Input(shape[:2] + [9])],
            lambda bb, x: R.strided_slice(x, [2], [1], [8], [2]), sizes)
        add(cases, "strided_slice", "slice-neg", cls, "float32", [Input(shape[:2] + [9])],
            lambda bb, x: R.strided_slice(x, [1, 2], [0, 1], [1, -1]), sizes)
        add(cases, "take", "take-axis0", cls, "float32",
            [Input([7] + shape[1:]), Input([n] if isinstance(n, str) else [n], "int64", "index:7")],
            lambda bb, x, i: R.take(x, i, axis=0), sizes)
        add(cases, "take", "take-axis0-i32", cls, "float32",
            [Input([7] + shape[1:]), Input([n] if isinstance(n, str) else [n], "int32", "index:7")],
            lambda bb, x, i: R.take(x, i, axis=0), sizes)
        for itype in ("int64", "int32"):
            tag = "" if itype == "int64" else "-i32"
            add(cases, "gather", f"gather_elements-axis2{tag}", cls, "float32",
                [Input(shape), Input(shape, itype, f"index:{shape[2]}")],
                lambda bb, x, i: R.gather_elements(x, i, axis=2), sizes)
            add(cases, "scatter", f"scatter_elements-axis0{tag}", cls, "float32",
                [Input(shape), Input(shape, itype, "index:1"), Input(shape)],
                lambda bb, x, i, u: R.scatter_elements(x, i, u, axis=0), sizes)


def concat_parts(bb, x, sections, axis):
    parts = bb.emit(R.split(x, sections, axis))
    k = len(parts.ty.fields)
    # The parts back together, last first, so every part is used and the order shows.
    return R.concat([relax.TupleGetItem(parts, i) for i in reversed(range(k))], axis)


def normalization(cases):
    for cls, shape, sizes in cls_shapes((4, 32), (37, 129), large=(70001, 3)):
        d = shape[-1]
        add(cases, "softmax", "softmax-axis-1", cls, "float32", [Input(shape)],
            lambda bb, x: R.nn.softmax(x, -1), sizes)
        add(cases, "softmax", "log_softmax-axis-1", cls, "float32", [Input(shape)],
            lambda bb, x: R.nn.log_softmax(x, -1), sizes)
        if cls != "large":
            add(cases, "softmax", "softmax-axis0", cls, "float32", [Input(shape)],
                lambda bb, x: R.nn.softmax(x, 0), sizes)
        add(cases, "norm", "layer_norm", cls, "float32", [Input(shape), Input([d]), Input([d])],
            lambda bb, x, g, b: R.nn.layer_norm(x, g, b, [-1]), sizes)
        add(cases, "norm", "rms_norm", cls, "float32", [Input(shape), Input([d])],
            lambda bb, x, g: R.nn.rms_norm(x, g, [-1]), sizes)
    for cls, shape, sizes in [("static", [2, 8, 5], [{}]), ("symbolic", ["n", 8, 5], SYM),
                              ("odd", [3, 6, 37], [{}]), ("one", [1, 2, 1], [{}])]:
        c = shape[1]
        add(cases, "norm", "group_norm", cls, "float32", [Input(shape), Input([c]), Input([c])],
            lambda bb, x, g, b: R.nn.group_norm(x, g, b, 2, 1, [2]), sizes)


def conv(cases):
    # (tag, x shape, w shape, kwargs)
    c1 = [
        ("conv1d", [1, 4, 16], [6, 4, 3], {}),
        ("conv1d-stride2-pad1", [2, 4, 17], [6, 4, 3], {"strides": 2, "padding": 1}),
        ("conv1d-dilation2", [1, 4, 16], [6, 4, 3], {"dilation": 2}),
        ("conv1d-groups2", [1, 4, 16], [6, 2, 3], {"groups": 2}),
    ]
    c2 = [
        ("conv2d", [1, 3, 8, 8], [4, 3, 3, 3], {}),
        ("conv2d-stride2-pad1", [2, 3, 9, 9], [4, 3, 3, 3], {"strides": 2, "padding": 1}),
        ("conv2d-dilation2", [1, 3, 9, 9], [4, 3, 3, 3], {"dilation": 2}),
        ("conv2d-groups2", [1, 4, 8, 8], [6, 2, 3, 3], {"groups": 2}),
        ("conv2d-depthwise", [1, 4, 8, 8], [4, 1, 3, 3], {"groups": 4}),
    ]
    for tag, x, w, kw in c1:
        add(cases, "conv1d", tag, "static", "float32", [Input(x), Input(w)],
            lambda bb, a, b, kw=kw: R.nn.conv1d(a, b, **kw))
    for tag, x, w, kw in c2:
        add(cases, "conv2d", tag, "static", "float32", [Input(x), Input(w)],
            lambda bb, a, b, kw=kw: R.nn.conv2d(a, b, **kw))
    add(cases, "conv1d", "conv1d", "symbolic", "float32", [Input(["n", 4, 16]), Input([6, 4, 3])],
        lambda bb, a, b: R.nn.conv1d(a, b), SYM)
    add(cases, "conv2d", "conv2d", "symbolic", "float32",
        [Input(["n", 3, 8, 8]), Input([4, 3, 3, 3])], lambda bb, a, b: R.nn.conv2d(a, b), SYM)
    add(cases, "conv1d", "conv1d", "odd", "float32", [Input([3, 5, 37]), Input([7, 5, 3])],
        lambda bb, a, b: R.nn.conv1d(a, b, padding=1))
    add(cases, "conv2d", "conv2d", "odd", "float32", [Input([3, 5, 13, 11]), Input([7, 5, 3, 3])],
        lambda bb, a, b: R.nn.conv2d(a, b, padding=1))
    add(cases, "conv1d", "conv1d", "one", "float32", [Input([1, 1, 1]), Input([1, 1, 1])],
        lambda bb, a, b: R.nn.conv1d(a, b))
    add(cases, "conv2d", "conv2d", "one", "float32", [Input([1, 1, 1, 1]), Input([1, 1, 1, 1])],
        lambda bb, a, b: R.nn.conv2d(a, b))


def pooling(cases):
    shapes = [("static", [1, 3, 8, 8], [{}]), ("symbolic", ["n", 3, 8, 8], SYM),
              ("odd", [2, 3, 13, 11], [{}]), ("one", [1, 1, 2, 2], [{}])]
    for cls, shape, sizes in shapes:
        add(cases, "pool", "max_pool2d", cls, "float32", [Input(shape)],
            lambda bb, x: R.nn.max_pool2d(x, 2, 2), sizes)
        add(cases, "pool", "avg_pool2d-pad1", cls, "float32", [Input(shape)],
            lambda bb, x: R.nn.avg_pool2d(x, 3, 1, 1), sizes)
        add(cases, "pool", "adaptive_avg_pool2d", cls, "float32", [Input(shape)],
            lambda bb, x: R.nn.adaptive_avg_pool2d(x, 1), sizes)
        add(cases, "resize", "resize2d-nearest", cls, "float32", [Input(shape)],
            lambda bb, x: R.image.resize2d(x, (5, 7), method="nearest_neighbor"), sizes)
        add(cases, "resize", "resize2d-linear", cls, "float32", [Input(shape)],
            lambda bb, x: R.image.resize2d(x, (5, 7), method="linear"), sizes)


def scans_and_sorts(cases):
    for cls, shape, sizes in cls_shapes((4, 8), (37, 129)):
        add(cases, "cumsum", "cumsum-axis1", cls, "float32", [Input(shape)],
            lambda bb, x: R.cumsum(x, axis=1), sizes)
        add(cases, "cumsum", "cumsum-axis1", cls, "int32", [Input(shape, "int32", "int")],
            lambda bb, x: R.cumsum(x, axis=1), sizes)
        add(cases, "cumsum", "cumprod-axis1", cls, "float32", [Input(shape, "float32", "unit")],
            lambda bb, x: R.cumprod(x, axis=1), sizes)
        add(cases, "sort", "sort-axis1", cls, "float32", [Input(shape)],
            lambda bb, x: R.sort(x, axis=1), sizes)
        add(cases, "sort", "argsort-axis1", cls, "float32", [Input(shape)],
            lambda bb, x: R.argsort(x, axis=1, dtype="int32"), sizes)
        k = 1 if cls == "one" else 3
        add(cases, "sort", "topk-values", cls, "float32", [Input(shape)],
            lambda bb, x, k=k: relax.TupleGetItem(bb.emit(R.topk(x, k, axis=1)), 0), sizes)


def casts(cases):
    pairs = [("float32", "int32", "normal"), ("int32", "float32", "int"),
             ("int64", "int32", "int"), ("int32", "int64", "int"), ("float32", "float16", "normal"),
             ("float16", "float32", "normal"), ("float32", "bool", "int"),
             ("bool", "float32", "bool")]
    for src, dst, fill in pairs:
        for cls, shape, sizes in elementwise_shapes()[:4]:
            add(cases, "cast", f"{src}->{dst}", cls, f"{src}->{dst}", [Input(shape, src, fill)],
                lambda bb, x, d=dst: R.astype(x, d), sizes)


FAMILIES = [unary, binary, compare, reductions, matmul, layout, normalization, conv, pooling,
            scans_and_sorts, casts]


def all_cases():
    cases = []
    for family in FAMILIES:
        family(cases)
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate case ids: {sorted(dup)[:5]}")
    return cases
