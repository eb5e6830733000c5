"""Runs an ONNX model on onnxruntime (the reference relaxvm's imports are checked against).

    tools/onnx/.venv/bin/python tools/onnx/run_onnxruntime.py MODEL DIR

DIR/inputs.json lists the inputs, [{"name", "shape", "file"}], each file raw
little-endian float32 in DIR; every output is written to DIR as out_<i>.bin
(float32) and listed with its name and shape in DIR/outputs.json. Used by
tests/_ocr_checks.ts on the PP-OCRv4 models (tools/fetch_ppocr.ts).
"""

import json
import os
import sys

import numpy as np
import onnxruntime as ort


def main() -> None:
    model, folder = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "inputs.json")) as f:
        specs = json.load(f)
    feeds = {}
    for spec in specs:
        data = np.fromfile(os.path.join(folder, spec["file"]), dtype="<f4")
        feeds[spec["name"]] = data.reshape(spec["shape"])
    options = ort.SessionOptions()
    # The reference: one thread, so the result does not depend on the machine's cores.
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    listed = []
    for i, (meta, value) in enumerate(zip(session.get_outputs(), outputs)):
        name = f"out_{i}.bin"
        np.asarray(value, dtype="<f4").tofile(os.path.join(folder, name))
        listed.append({"name": meta.name, "shape": list(value.shape), "file": name})
    with open(os.path.join(folder, "outputs.json"), "w") as f:
        json.dump(listed, f)


if __name__ == "__main__":
    main()
