"""Folds a node test's inputs after the first into initializers.

    tools/onnx/.venv/bin/python tools/onnx/fold_inputs.py NODE_TEST_ROOT OUT_DIR NAME...

For each ONNX node test NAME under NODE_TEST_ROOT (onnx/backend/test/data/node/),
writes OUT_DIR/NAME.onnx: its model with inputs 1, 2, ... (test_data_set_0's
tensors) made initializers, so that only input 0 stays a graph input. ONNX's
Resize tests pass roi, scales and sizes as graph inputs, which relaxvm's
importer must know at import; tests/onnx_resize_test.ts checks its Resize
against the tests' expected outputs this way.
"""

import os
import sys

import onnx


def main() -> None:
    root, out = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        model = onnx.load(os.path.join(root, name, "model.onnx"))
        graph = model.graph
        for i, value in enumerate(list(graph.input)):
            if i == 0:
                continue
            path = os.path.join(root, name, "test_data_set_0", f"input_{i}.pb")
            tensor = onnx.TensorProto()
            with open(path, "rb") as f:
                tensor.ParseFromString(f.read())
            tensor.name = value.name
            graph.initializer.append(tensor)
            graph.input.remove(value)
        onnx.save(model, os.path.join(out, f"{name}.onnx"))


if __name__ == "__main__":
    main()
