"""Seeded random modules for the differential: chains of the operator suite's operators.

Each module is `forward(x, y)`: x of a random rank-2 or rank-3 shape (its first dimension
symbolic in about half of them), y a second operand shaped for the chain's binary and matmul
steps; a chain of 2-6 steps, each an operator drawn from the ones the suite covers, applied to
the running value. Float32 chains use the float operators; int32 chains the exact ones. Forms the
operator suite lists as refused or as a known bug are left out (each place says which), so that
every module is compared.
"""

import random

from tvm import relax

from cases import Case, Input

R = relax.op

FLOAT_UNARY = [("exp", lambda x: R.exp(R.clip(x, -4.0, 4.0))), ("tanh", R.tanh),
               ("sigmoid", R.sigmoid), ("relu", R.nn.relu), ("gelu", R.nn.gelu),
               ("silu", R.nn.silu), ("abs", R.abs), ("negative", R.negative),
               ("square", lambda x: R.square(R.clip(x, -8.0, 8.0))), ("sin", R.sin)]
INT_UNARY = [("abs", R.abs), ("negative", R.negative),
             ("clip", lambda x: R.clip(x, -100, 100))]
FLOAT_BINARY = [("add", R.add), ("subtract", R.subtract), ("multiply", R.multiply),
                ("maximum", R.maximum), ("minimum", R.minimum)]
INT_BINARY = [("add", R.add), ("subtract", R.subtract), ("maximum", R.maximum),
              ("minimum", R.minimum)]


def dims(x):
    return list(x.ty.shape)


def random_cases(count, seed):
    return [random_case(random.Random(f"{seed}/{n}"), n) for n in range(count)]


def random_case(rng, n):
    dtype = "int32" if rng.random() < 0.25 else "float32"
    rank = rng.choice([2, 3])
    shape = [rng.choice([1, 2, 3, 5, 8, 17, 33]) for _ in range(rank)]
    symbolic = rng.random() < 0.5
    if symbolic:
        sizes = [{"n": shape[0]}, {"n": rng.choice([1, 4, 9, 40])}]
        x_shape = ["n"] + shape[1:]
    else:
        sizes = [{}]
        x_shape = list(shape)
    last = shape[-1]
    fill = "int" if dtype == "int32" else "normal"
    steps = []
    kinds = ["unary", "binary", "binary-row"]
    if dtype == "float32":
        # No cumsum: its host code allocates a workspace, which the exporter refuses (the
        # operator suite lists it). matmul in one chain of four: dlight's kernels take seconds
        # each to compile on a software adapter.
        kinds += ["reduce", "softmax", "norm", "permute"]
        if rng.random() < 0.25:
            kinds.append("matmul")
    else:
        kinds += ["reduce", "permute", "where"]
    for _ in range(rng.randint(2, 6)):
        steps.append(rng.choice(kinds))
    # `where` reads the running value twice, so TVM's fusion doubles the expression with each
    # one: five in a row kept relax.build busy for minutes (seed 28, module 834). One a chain.
    while steps.count("where") > 1:
        steps[len(steps) - 1 - steps[::-1].index("where")] = "unary"
    # y: [last, last] serves binary (same width), row broadcasts and matmul's right operand.
    inputs = [Input(x_shape, dtype, fill), Input([last, last], dtype, fill)]
    picks = [rng.random() for _ in steps]
    ops = []

    def chain(bb, x, y):
        v = x
        for kind, p in zip(steps, picks):
            d = dims(v)
            w = d[-1]
            if kind in ("binary", "binary-row", "matmul", "where") and not int_eq(w, last):
                kind = "unary"  # after a keepdims reduction the width is 1
            # Softmax and norms over rows of one element are in: the exporter's
            # tools/tvm/tir_fixups.py fixed TVM's WebGPU build of them (a reduction over an
            # axis of 1), and launch plans allocate their workspaces.
            if kind == "unary":
                name, f = pick(FLOAT_UNARY if dtype == "float32" else INT_UNARY, p)
                v = bb.emit(f(v))
            elif kind == "binary":
                name, f = pick(FLOAT_BINARY if dtype == "float32" else INT_BINARY, p)
                # Against y's first row, [1, last]: broadcast over every leading dimension.
                v = bb.emit(f(v, R.strided_slice(y, [0], [0], [1])))
            elif kind == "binary-row":
                name, f = pick(FLOAT_BINARY if dtype == "float32" else INT_BINARY, p)
                row = R.reshape(R.strided_slice(y, [0], [0], [1]), [last])
                v = bb.emit(f(row, v))
            elif kind == "reduce":
                # No int32 max: TVM writes its identity as a WGSL literal WGSL rejects (the
                # operator suite lists it; the load refuses it).
                name = ["sum", "max", "mean"][int(p * 3)] if dtype == "float32" else "sum"
                f = {"sum": R.sum, "max": R.max, "mean": R.mean}[name]
                v = bb.emit(f(v, [-1], keepdims=True))
                name += "-keep"
            elif kind == "softmax":
                name = "softmax" if p < 0.5 else "log_softmax"
                v = bb.emit((R.nn.softmax if p < 0.5 else R.nn.log_softmax)(v, -1))
            elif kind == "norm":
                name = "rms_norm"
                g = R.reshape(R.strided_slice(y, [0], [0], [1]), [last]) \
                    if int_eq(w, last) else None
                if g is None:
                    name, v = "tanh", bb.emit(R.tanh(v))
                else:
                    v = bb.emit(R.nn.rms_norm(v, g, [-1]))
            elif kind == "matmul":
                name = "matmul"
                v = bb.emit(R.divide(R.matmul(v, y), relax.const(float(last), "float32")))
            elif kind == "permute":
                if len(d) == 3 and int_eq(d[1], d[2]):
                    name, v = "permute", bb.emit(R.permute_dims(v, [0, 2, 1]))
                elif len(d) == 2 and int_eq(d[0], d[1]):
                    name, v = "permute", bb.emit(R.permute_dims(v, [1, 0]))
                else:
                    name, v = "flip", bb.emit(R.flip(v, len(d) - 1))
            elif kind == "cumsum":
                name, v = "cumsum", bb.emit(R.cumsum(v, axis=len(d) - 1))
            elif kind == "where":
                name = "where"
                v = bb.emit(R.where(R.less(v, relax.const(0, dtype)), v,
                                    R.strided_slice(y, [0], [0], [1])))
            ops.append(name)
        return v

    case = Case("random", f"m{n}", "symbolic" if symbolic else "static", dtype, inputs, chain,
                sizes)
    # The chain's operators are only known once it is built; build it now to name them.
    from cases import module
    module(case)
    case.description = f"{dtype} x[{','.join(map(str, x_shape))}]: {' > '.join(ops)}"
    return case


def int_eq(a, b):
    try:
        return int(a) == int(b)
    except TypeError:
        return False


def pick(options, p):
    return options[min(int(p * len(options)), len(options) - 1)]
