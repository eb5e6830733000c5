"""Runs an ONNX model on onnxruntime (the pinned tools/onnx/.venv) for the real-model tests.

    tools/onnx/.venv/bin/python tools/onnx/ort_reference.py MODEL < request.json > reply.json

The request is {"calls": [feeds, ...], "carry": {"output name": "input name", ...}}; each feeds
is {"input name": {"dtype", "shape", "data" (base64 of little-endian bytes)}}. The calls run in
order on one session; an input a call does not give is the previous call's output that `carry`
maps to it (a recurrent state: Silero VAD's `stateN` → `state`), so onnxruntime carries its own
state exactly as the relaxvm side carries its. The reply is {"outputs": [{"name": tensor}, ...]},
one per call, every output as float32 (integers as int64) in the same encoding.
"""

import base64
import json
import sys

import numpy as np
import onnxruntime as ort


def decode(t):
    return np.frombuffer(base64.b64decode(t["data"]), dtype=t["dtype"]).reshape(t["shape"]).copy()


def encode(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = a.astype("<f4")
    elif a.dtype.kind in "iub":
        a = a.astype("<i8")
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def main():
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
    request = json.load(sys.stdin)
    carry = request.get("carry", {})
    names = [o.name for o in session.get_outputs()]
    previous = {}
    replies = []
    for feeds in request["calls"]:
        inputs = {name: decode(t) for name, t in feeds.items()}
        for out, into in carry.items():
            if into not in inputs and out in previous:
                inputs[into] = previous[out]
        results = session.run(None, inputs)
        previous = dict(zip(names, results))
        replies.append({name: encode(r) for name, r in previous.items()})
    json.dump({"outputs": replies}, sys.stdout)


if __name__ == "__main__":
    main()
