"""Record TVM's CPU build of the tiny Llama driving its paged KV cache, for relaxvm's WebGPU run.

Usage: tools/tvm/.venv/bin/python tools/tvm/llama_trace.py OUT.json
       tools/tvm/.venv/bin/python tools/tvm/llama_trace.py --random SEED OPS OUT.json

Builds llama_module.py's model (its KV cache's kernels built for `llvm`) with the seeded weights of
the exported package (testdata/tvm_webgpu/llama), runs it in TVM's relax VM on the CPU and drives
the cache with TVM's global functions through issue 29's scenario: a prefill; a batched prefill of
two sequences, one crossing a page; batched decodes of three and four sequences; a fork mid-page
(sharing a full page) and one at the end of a parent whose length is a page multiple; popn (one
into a shared prefix); remove; a prefill in two chunks onto the forked sequence; and 24 greedy
steps of three sequences. After every operation it records the free pages and the total length;
after every forward the logits (7 significant digits) and their argmax.
tests/webgpu/tvm_llama_suite.ts replays it; tests/tvm_llama_trace_test.ts regenerates it.

`--random` records a seeded run of OPS random operations instead (RANDOM_CACHE: 7 pages of 16,
so the pool runs near empty): adds, removes, forks (mid-page, at page ends, at the end), popn and
forwards of up to 4 sequences (a batch decode when every length is 1, else a batched prefill), each
forward checked to fit the free pages first (so TVM never refuses part-way), and per forward and
sequence a summary of the logits (argmax, the largest and second largest logit, their sum) to keep
the fixture small.
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


# max_batch_size, max_total_seq_len (7 pages of 16), prefill_chunk_size, page_size, sliding
RANDOM_CACHE = [4, 96, 32, 16, 0]


def build():
    """TVM's VM of the model for llvm, and its weights."""
    config = LlamaConfig()
    mod, named = llama_module(config, tvm.target.Target("llvm"))
    params = seeded_params(named)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    weights = [tvm.runtime.tensor(params[name], tvm.cpu()) for name, _ in named]
    return config, vm, weights


def run_forward(vm, weights, kv, ids, lists, d):
    """batch_decode when every list is one token, else batch_prefill: logits [len(ids), vocab]."""
    g = tvm.get_global_func
    flat = [t for ts in lists for t in ts]
    e = vm["embed"](tvm.runtime.tensor(np.array(flat, "int32")), weights).numpy()
    g("vm.builtin.kv_state_begin_forward")(kv, Shape(ids), Shape([len(ts) for ts in lists]))
    if all(len(ts) == 1 for ts in lists):
        out = vm["batch_decode"](tvm.runtime.tensor(e.reshape(len(ids), 1, d)), kv, weights)
    else:
        ends = (np.cumsum([len(ts) for ts in lists]) - 1).astype("int32")
        out = vm["batch_prefill"](tvm.runtime.tensor(e.reshape(1, -1, d)),
                                  tvm.runtime.tensor(ends), kv, weights)
    g("vm.builtin.kv_state_end_forward")(kv)
    return out[0].numpy().reshape(len(ids), -1)


def random_trace(seed, count, out_path):
    config, vm, weights = build()
    g = tvm.get_global_func
    kv = vm["create_paged_kv_cache"](*[Shape([v]) for v in RANDOM_CACHE])
    page = RANDOM_CACHE[3]
    rng = np.random.default_rng(seed)
    lengths = {}
    next_id = 0
    steps = []

    def free():
        return int(g("vm.builtin.attention_kv_cache_get_num_available_pages")(kv))

    while len(steps) < count:
        step = None
        r = rng.random()
        ids = sorted(lengths)
        if r < 0.1 and len(lengths) < 8 or not lengths:
            step = {"op": ["add", next_id]}
            g("vm.builtin.kv_state_add_sequence")(kv, next_id)
            lengths[next_id] = 0
            next_id += 1
        elif r < 0.2:
            victim = int(rng.choice(ids))
            step = {"op": ["remove", victim]}
            g("vm.builtin.kv_state_remove_sequence")(kv, victim)
            del lengths[victim]
        elif r < 0.32:
            parent = int(rng.choice(ids))
            n = lengths[parent]
            if n == 0 or len(lengths) >= 8 or free() < 2:
                continue
            kind = rng.integers(3)
            pos = -1 if kind == 0 else int(min(n, page * int(rng.integers(1, n // page + 2)))) \
                if kind == 1 else int(rng.integers(1, n + 1))
            step = {"op": ["fork", parent, next_id, pos]}
            g("vm.builtin.kv_state_fork_sequence")(kv, parent, next_id, pos)
            lengths[next_id] = n if pos == -1 else pos
            next_id += 1
        elif r < 0.42:
            seq = int(rng.choice(ids))
            if lengths[seq] == 0 or free() < 1:
                continue
            n = int(rng.integers(1, min(lengths[seq], 20) + 1))
            step = {"op": ["popn", seq, n]}
            g("vm.builtin.kv_state_popn")(kv, seq, n)
            lengths[seq] -= n
        else:
            chosen = [int(i) for i in rng.permutation(ids)[: int(rng.integers(1, 5))]]
            decode = rng.random() < 0.6
            lists = [[int(t) for t in rng.integers(0, 64, 1 if decode else int(rng.integers(1, 12)))]
                     for _ in chosen]
            while sum(len(ts) for ts in lists) > RANDOM_CACHE[2]:
                lists[-1] = lists[-1][: len(lists[-1]) // 2] or [1]
                if len(lists) > 1:
                    lists.pop()
                    chosen.pop()
            # At most one new page per 16 tokens and one more per sequence: never refused part-way.
            if sum(len(ts) // page + 1 for ts in lists) > free():
                continue
            logits = run_forward(vm, weights, kv, chosen, lists, config.hidden_size)
            step = {"op": ["forward", chosen, lists], "summary": [
                [int(np.argmax(row)), *(float(f"{x:.7g}") for x in
                                        (np.sort(row)[-1], np.sort(row)[-2], row.sum()))]
                for row in logits]}
            for i, ts in zip(chosen, lists):
                lengths[i] += len(ts)
        step["freePages"] = free()
        step["totalLength"] = int(g("vm.builtin.attention_kv_cache_get_total_sequence_length")(kv))
        steps.append(step)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"tvm": tvm.__version__, "reference": "relax.build(target='llvm'), relax VM on CPU",
                   "seed": seed, "cache": RANDOM_CACHE, "steps": steps}, f, separators=(",", ":"))
        f.write("\n")


def main(out_path):
    config, vm, weights = build()
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
    if len(sys.argv) == 5 and sys.argv[1] == "--random":
        random_trace(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        raise SystemExit("usage: llama_trace.py OUT.json | --random SEED OPS OUT.json")
