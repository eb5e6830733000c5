"""Record TVM's CPU build of the tiny Llama driving its paged KV cache, for relaxvm's WebGPU run.

Usage: tools/tvm/.venv/bin/python tools/tvm/llama_trace.py OUT.json

Builds llama_module.py's model (its KV cache's kernels built for `llvm`) with the seeded weights of
the exported package (testdata/tvm_webgpu/llama), runs it in TVM's relax VM on the CPU and drives
the cache with TVM's global functions through issue 29's scenario: a prefill; a batched prefill of
two sequences, one crossing a page; batched decodes of three and four sequences; a fork mid-page
(sharing a full page) and one at the end of a parent whose length is a page multiple; popn (one
into a shared prefix); remove; a prefill in two chunks onto the forked sequence; and 24 greedy
steps of three sequences. After every operation it records the free pages and the total length;
after every forward the logits (7 significant digits) and their argmax.
tests/webgpu/tvm_llama_suite.ts replays it; tests/tvm_llama_trace_test.ts regenerates it.
"""

import json
import os
import sys

import numpy as np
import tvm
from tvm import relax
from tvm_ffi import Shape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_module import LlamaConfig, llama_module, seeded_params  # noqa: E402

# max_batch_size, max_total_seq_len, prefill_chunk_size, page_size (the kernels' 16),
# support_sliding_window
CACHE = [4, 256, 32, 16, 0]


def tokens(n, salt):
    """n token ids of a 64-token vocabulary, fixed by `salt`."""
    return [(7 * i + 13 * salt + 3) % 64 for i in range(n)]


# [op, ...]: "prefill" [id, tokens] (the `prefill` function, one sequence); "batch_prefill"
# [ids, token lists]; "batch_decode" [ids, tokens]; "greedy" [ids, first tokens, steps] (batch
# decodes feeding each sequence its argmax).
SCENARIO = [
    ["add", 0],
    ["prefill", 0, tokens(15, 0)],
    ["add", 1],
    ["add", 2],
    ["batch_prefill", [1, 2], [tokens(20, 1), tokens(6, 2)]],
    ["batch_decode", [0, 1, 2], [5, 17, 40]],
    ["fork", 1, 3, 18],
    ["fork", 0, 4, -1],
    ["batch_decode", [0, 1, 3, 4], [9, 2, 33, 60]],
    ["popn", 1, 3],
    ["popn", 4, 2],
    ["remove", 2],
    ["prefill", 3, tokens(32, 3)],
    ["prefill", 3, tokens(8, 4)],
    ["greedy", [0, 1, 3], [11, 22, 44], 24],
]


def main(out_path):
    config = LlamaConfig()
    mod, named = llama_module(config, tvm.target.Target("llvm"))
    params = seeded_params(named)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    weights = [tvm.runtime.tensor(params[name], tvm.cpu()) for name, _ in named]
    g = tvm.get_global_func
    kv = vm["create_paged_kv_cache"](*[Shape([v]) for v in CACHE])
    d = config.hidden_size

    def embed(ids):
        e = vm["embed"](tvm.runtime.tensor(np.array(ids, "int32")), weights).numpy()
        return e

    def forward(fn, ids, lengths, embeds, *extra):
        g("vm.builtin.kv_state_begin_forward")(kv, Shape(ids), Shape(lengths))
        out = vm[fn](tvm.runtime.tensor(embeds), *extra, kv, weights)
        g("vm.builtin.kv_state_end_forward")(kv)
        return out[0].numpy().reshape(len(ids), -1)

    steps = []
    for op in SCENARIO:
        step = {"op": op}
        kind = op[0]
        if kind == "add":
            g("vm.builtin.kv_state_add_sequence")(kv, op[1])
        elif kind == "remove":
            g("vm.builtin.kv_state_remove_sequence")(kv, op[1])
        elif kind == "fork":
            g("vm.builtin.kv_state_fork_sequence")(kv, op[1], op[2], op[3])
        elif kind == "popn":
            g("vm.builtin.kv_state_popn")(kv, op[1], op[2])
        elif kind == "prefill":
            logits = forward("prefill", [op[1]], [len(op[2])], embed(op[2]).reshape(1, -1, d))
            step["logits"] = logits
        elif kind == "batch_prefill":
            ids, lists = op[1], op[2]
            flat = [t for ts in lists for t in ts]
            ends = np.cumsum([len(ts) for ts in lists]) - 1
            logits = forward("batch_prefill", ids, [len(ts) for ts in lists],
                             embed(flat).reshape(1, -1, d),
                             tvm.runtime.tensor(ends.astype("int32")))
            step["logits"] = logits
        elif kind == "batch_decode":
            ids = op[1]
            step["logits"] = forward("batch_decode", ids, [1] * len(ids),
                                     embed(op[2]).reshape(len(ids), 1, d))
        elif kind == "greedy":
            ids, last, n = op[1], list(op[2]), op[3]
            generated = []
            for _ in range(n):
                logits = forward("batch_decode", ids, [1] * len(ids),
                                 embed(last).reshape(len(ids), 1, d))
                last = [int(i) for i in logits.argmax(axis=1)]
                generated.append(last)
            step["tokens"] = generated
            step["logits"] = logits  # of the last step
        else:
            raise ValueError(op)
        if "logits" in step:
            step["argmax"] = [int(i) for i in step["logits"].argmax(axis=1)]
            step["logits"] = [[float(f"{x:.7g}") for x in row] for row in step["logits"]]
        step["freePages"] = int(g("vm.builtin.attention_kv_cache_get_num_available_pages")(kv))
        step["totalLength"] = int(g("vm.builtin.attention_kv_cache_get_total_sequence_length")(kv))
        steps.append(step)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"tvm": tvm.__version__, "reference": "relax.build(target='llvm'), relax VM on CPU",
                   "cache": CACHE, "steps": steps}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: llama_trace.py OUT.json")
    main(sys.argv[1])
