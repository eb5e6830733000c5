"""Record TVM's paged KV cache attention on the CPU, for relaxvm's reference to match.

Usage: tools/tvm/.venv/bin/python tools/tvm/kv_attention_trace.py OUT.json

Builds TVM 0.27's CPU kernels of `relax.frontend.nn.llm.kv_cache` for `llvm` (as TVM's
tests/python/relax/test_runtime_builtin_paged_attention_kv_cache_cpu.py does), creates the
cache with `vm.builtin.paged_attention_kv_cache_create` (RoPE mode normal), runs a scenario
of prefills, batched decodes, forks mid-page and at the end, popn into shared prefixes and
a prefix three blocks deep, calling `vm.builtin.attention_kv_cache_attention_with_fused_qkv`
for every layer of every forward with seeded inputs (the generator of
tests/kv_state_differential_test.ts), and records every output and, at the end, each
sequence's cached K and V (`debug_get_kv`).
"""

import json
import sys

import numpy as np
import tvm
from tvm.relax.frontend.nn.llm.kv_cache import (
    _attention_decode_cpu,
    _attention_prefill_cpu,
    _attention_prefill_ragged_cpu,
    _compact_kv_copy_cpu,
    _copy_single_page_cpu,
    _kv_cache_debug_get_kv,
    _kv_cache_transpose_append,
    _merge_state_inplace_cpu,
    llama_rope_with_position_map,
)
from tvm.s_tir import dlight as dl
from tvm_ffi import Shape

CONFIG = {
    "max_batch_size": 8,
    "max_total_seq_len": 128,
    "prefill_chunk_size": 32,
    "page_size": 4,
    "num_layers": 2,
    "num_qo_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 8,
    "rope_theta": 500.0,
    "rope_scale": 0.5,
}

# The scenario: [op, args...]; "forward" is [ids, lengths].
SCENARIO = [
    ["add", 0],
    ["add", 1],
    ["forward", [0], [7]],
    ["forward", [1, 0], [5, 2]],
    ["forward", [0, 1], [1, 1]],
    ["forward", [0, 1], [1, 1]],
    ["forward", [0, 1], [1, 1]],
    ["fork", 0, 2, 5],
    ["fork", 1, 3, -1],
    ["forward", [2, 0, 3, 1], [1, 1, 1, 1]],
    ["forward", [2], [6]],
    ["fork", 2, 4, 10],
    ["forward", [4, 2, 1], [3, 1, 2]],
    ["forward", [4, 3, 2, 1], [1, 1, 1, 1]],
    ["popn", 0, 11],
    ["popn", 4, 2],
    ["forward", [0, 4, 3], [2, 1, 1]],
    ["remove", 2],
    ["forward", [4, 0], [1, 1]],
    ["fork", 4, 5, 8],
    ["forward", [5, 4], [4, 1]],
    ["forward", [0, 1, 3, 4, 5], [3, 2, 1, 4, 2]],
]


class Lcg:
    """Numbers in [-1, 1), as the Deno test's generator."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFF

    def take(self, n):
        out = np.empty(n, dtype=np.float32)
        for i in range(n):
            self.s = (self.s * 1664525 + 1013904223) & 0xFFFFFFFF
            out[i] = self.s / 2**31 - 1
        return out


def build(func, target):
    mod = tvm.IRModule({"main": func})
    with target:
        mod = dl.ApplyDefaultSchedule(dl.gpu.Fallback())(mod)
    return tvm.tirx.build(mod["main"], target=target).main


def main():
    c = CONFIG
    H, KH, D, L = c["num_qo_heads"], c["num_kv_heads"], c["head_dim"], c["num_layers"]
    target = tvm.target.Target("llvm")
    dt = "float32"
    page = c["page_size"]
    transpose_append = build(_kv_cache_transpose_append(KH, D, dt, page_size=page), target)
    ragged = build(_attention_prefill_ragged_cpu(KH, H, D, D, dt, {}), target)
    prefill = build(_attention_prefill_cpu(KH, H, D, dt, False, {}, page_size=page), target)
    decode = build(_attention_decode_cpu(KH, H, D, dt, False, {}, page_size=page), target)
    merge = build(_merge_state_inplace_cpu(dt), target)
    rotary = build(
        llama_rope_with_position_map(c["rope_theta"], c["rope_scale"], D, H, KH, dt, {}), target
    )
    copy_page = build(_copy_single_page_cpu(KH, c["page_size"], D, dt), target)
    debug_get_kv = build(_kv_cache_debug_get_kv(L, KH, D, dt), target)
    compact = build(_compact_kv_copy_cpu(KH, D, dt, page_size=page), target)

    g = tvm.get_global_func
    kv = g("vm.builtin.paged_attention_kv_cache_create")(
        Shape([c["max_batch_size"], c["max_total_seq_len"], c["prefill_chunk_size"], page, 0]),
        Shape([0, L]),
        H,
        KH,
        D,
        D,
        Shape([0] * L),
        False,
        1,  # RoPE normal
        c["rope_scale"],
        c["rope_theta"],
        None,
        tvm.runtime.empty((), dt, device=tvm.cpu()),
        transpose_append,
        None,
        ["tirx", ragged],
        ["tirx", prefill],
        ["tirx", decode],
        ["tirx", prefill],
        ["tirx", decode],
        [],
        [],
        [],
        [merge],
        rotary,
        copy_page,
        debug_get_kv,
        compact,
    )
    rng = Lcg(29)
    sm_scale = D**-0.5
    outputs = []
    lengths = {}
    for op in SCENARIO:
        if op[0] == "add":
            g("vm.builtin.kv_state_add_sequence")(kv, op[1])
            lengths[op[1]] = 0
        elif op[0] == "remove":
            g("vm.builtin.kv_state_remove_sequence")(kv, op[1])
            del lengths[op[1]]
        elif op[0] == "fork":
            g("vm.builtin.kv_state_fork_sequence")(kv, op[1], op[2], op[3])
            lengths[op[2]] = lengths[op[1]] if op[3] == -1 else op[3]
        elif op[0] == "popn":
            g("vm.builtin.kv_state_popn")(kv, op[1], op[2])
            lengths[op[1]] -= op[2]
        else:
            ids, lens = op[1], op[2]
            g("vm.builtin.kv_state_begin_forward")(kv, Shape(ids), Shape(lens))
            total = sum(lens)
            for layer in range(L):
                qkv = rng.take(total * (H + 2 * KH) * D).reshape(total, H + 2 * KH, D)
                out = tvm.runtime.empty((total, H, D), dt)
                g("vm.builtin.attention_kv_cache_attention_with_fused_qkv")(
                    kv, layer, sm_scale, tvm.runtime.tensor(qkv), out
                )
                outputs.append([round(float(x), 7) for x in out.numpy().reshape(-1)])
            g("vm.builtin.kv_state_end_forward")(kv)
            for i, n in zip(ids, lens):
                lengths[i] += n
    cached = {}
    for i in sorted(lengths):
        n = lengths[i]
        k = tvm.runtime.empty((L, n, KH, D), dt)
        v = tvm.runtime.empty((L, n, KH, D), dt)
        g("vm.builtin.attention_kv_cache_debug_get_kv")(kv, i, 0, n, k, v)
        cached[str(i)] = {
            "k": [round(float(x), 7) for x in k.numpy().reshape(-1)],
            "v": [round(float(x), 7) for x in v.numpy().reshape(-1)],
        }
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(
            {
                "tvm": tvm.__version__,
                "seed": 29,
                "config": CONFIG,
                "scenario": SCENARIO,
                "outputs": outputs,
                "cached": cached,
                "freePages": int(g("vm.builtin.attention_kv_cache_get_num_available_pages")(kv)),
            },
            f,
            separators=(",", ":"),
        )
        f.write("\n")


if __name__ == "__main__":
    main()
