"""Record a seeded random run of TVM's own paged KV cache, for relaxvm to replay.

Usage: tools/tvm/.venv/bin/python tools/tvm/kv_state_trace.py OUT.json [--ops N] [--seed S]

Creates TVM's cache with the wheel's `vm.builtin.paged_attention_kv_cache_create` on the
CPU. The bookkeeping needs no compiled kernel: every kernel operand is a Python function
(TVM's FFI takes them as packed functions), and two of them record what TVM asks of
them: `copy_single_page` (the partial page a fork copies) and `debug_get_kv` (the
position of every token of a sequence in the pages, which names the pages).

Then it drives a seeded random sequence of operations through TVM's global functions
(add, remove, fork at the end, mid-page and on page boundaries, popn including into
shared prefixes, begin/end forward with decode and prefill batches, clear), with a pool
small enough that pages run out, and records after each operation: whether TVM raised,
the free pages, the total length, the pages copied, the query positions of a forward,
and a hash of every sequence's position map. tests/kv_state_differential_test.ts
replays the operations on relaxvm's cache and compares every figure.

Operations that TVM rejects only after changing its state are not generated as such:
an unknown sequence in a batch comes first (TVM checks it before changing anything),
and after a batch or a fork that runs out of pages (TVM has then taken some pages and
lengthened some sequences; relaxvm refuses before changing anything) the run records
a `clear`, which puts both caches back in the same state. Batches with one sequence
twice, lengths below 1, or more tokens than the prefill chunk are not generated: TVM
does not check them at `begin_forward` and relaxvm refuses them (tests/kv_state_test.ts).
"""

import json
import random
import sys

import tvm
from tvm_ffi import Shape

CONFIG = {
    "max_batch_size": 6,
    "max_total_seq_len": 64,
    "prefill_chunk_size": 24,
    "page_size": 4,
    "num_layers": 1,
    "num_qo_heads": 2,
    "num_kv_heads": 1,
    "head_dim": 2,
}
ID_POOL = 10


def fnv(values, h=2166136261):
    """FNV-1a over 32-bit integers (little-endian bytes), as the Deno test computes it."""
    for v in values:
        v &= 0xFFFFFFFF
        for shift in (0, 8, 16, 24):
            h ^= (v >> shift) & 0xFF
            h = (h * 16777619) & 0xFFFFFFFF
    return h


class TvmCache:
    def __init__(self):
        self.copies = []
        self.last_map = None
        c = CONFIG

        def copy_page(_pages, src, dst, length):
            self.copies.append([int(src), int(dst), int(length)])

        def debug_get_kv(_pages, position_map, _k, _v, _layer):
            self.last_map = [int(x) for x in position_map.numpy().tolist()]

        def unused(*_args):
            raise RuntimeError("a kernel the bookkeeping should not call")

        g = tvm.get_global_func
        self.f = {
            n: g("vm.builtin." + n)
            for n in [
                "kv_state_add_sequence",
                "kv_state_remove_sequence",
                "kv_state_fork_sequence",
                "kv_state_popn",
                "kv_state_clear",
                "kv_state_begin_forward",
                "kv_state_end_forward",
                "attention_kv_cache_get_num_available_pages",
                "attention_kv_cache_get_total_sequence_length",
                "attention_kv_cache_get_query_positions",
                "attention_kv_cache_debug_get_kv",
            ]
        }
        self.kv = g("vm.builtin.paged_attention_kv_cache_create")(
            Shape(
                [
                    c["max_batch_size"],
                    c["max_total_seq_len"],
                    c["prefill_chunk_size"],
                    c["page_size"],
                    0,
                ]
            ),
            Shape([0, c["num_layers"]]),
            c["num_qo_heads"],
            c["num_kv_heads"],
            c["head_dim"],
            c["head_dim"],
            Shape([0] * c["num_layers"]),
            False,
            0,
            1.0,
            10000.0,
            None,
            tvm.runtime.empty((), "float32", device=tvm.cpu()),
            unused,
            None,
            ["tirx", unused],
            ["tirx", unused],
            ["tirx", unused],
            ["tirx", unused],
            ["tirx", unused],
            ["tirx", unused],
            ["tirx", unused],
            [],
            [unused],
            unused,
            copy_page,
            debug_get_kv,
            unused,
        )
        self.lengths = {}  # what the generator believes, from TVM's answers

    def call(self, name, *args):
        return self.f[name](self.kv, *args)

    def position_map(self, seq_id, length):
        if length == 0:
            return []
        c = CONFIG
        dims = (c["num_layers"], length, c["num_kv_heads"], c["head_dim"])
        k = tvm.runtime.empty(dims, "float32")
        self.call("attention_kv_cache_debug_get_kv", seq_id, 0, length, k, k)
        return self.last_map


def main():
    out = sys.argv[1]
    ops = int(sys.argv[sys.argv.index("--ops") + 1]) if "--ops" in sys.argv else 1500
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 29
    rng = random.Random(seed)
    t = TvmCache()
    page = CONFIG["page_size"]
    records = []
    lengths = {}  # seq id -> length, as TVM reports it

    def pick_existing():
        return rng.choice(sorted(lengths)) if lengths else rng.randrange(ID_POOL)

    def existing_or_unknown(p):
        """An existing id with probability p, else an id no sequence ever has."""
        return pick_existing() if rng.random() < p else rng.randrange(ID_POOL, ID_POOL + 3)

    def pick_new():
        free = [i for i in range(ID_POOL) if i not in lengths]
        return rng.choice(free) if free else rng.randrange(ID_POOL)

    pending_clear = False
    while len(records) < ops:
        free_pages = t.call("attention_kv_cache_get_num_available_pages")
        if pending_clear:
            op = ["clear"]
            pending_clear = False
        else:
            r = rng.random()
            tight = free_pages < 4
            if r < 0.10 or not lengths:
                op = ["add", pick_new() if rng.random() < 0.9 else pick_existing()]
            elif r < (0.30 if tight else 0.16):
                op = ["remove", existing_or_unknown(0.92)]
            elif r < (0.44 if tight else 0.32):
                parent = existing_or_unknown(0.93)
                length = lengths.get(parent, 0)
                kind = rng.random()
                if kind < 0.25:
                    pos = -1
                elif kind < 0.45:
                    pos = length
                elif kind < 0.65 and length >= page:
                    pos = page * rng.randrange(0, length // page + 1)
                elif kind < 0.95:
                    pos = rng.randrange(0, length + 1)
                else:
                    pos = length + rng.randrange(1, 4)  # past the end: refused
                child = pick_new() if rng.random() < 0.93 else pick_existing()
                op = ["fork", parent, child, pos]
            elif r < (0.62 if tight else 0.44):
                seq = existing_or_unknown(0.95)
                length = lengths.get(seq, 0)
                if rng.random() < 0.93:
                    n = rng.randrange(0, length + 1)
                else:
                    n = length + rng.randrange(1, 3)  # past the length: refused
                op = ["popn", seq, n]
            elif r < 0.47:
                op = ["clear"] if rng.random() < 0.3 else ["add", pick_new()]
            else:
                ids = sorted(lengths)
                rng.shuffle(ids)
                ids = ids[: rng.randint(1, min(len(ids), CONFIG["max_batch_size"]))]
                if rng.random() < 0.5:
                    lens = [1] * len(ids)
                else:
                    budget = CONFIG["prefill_chunk_size"]
                    lens = []
                    for _ in ids:
                        most = max(1, min(9, budget - (len(ids) - len(lens) - 1)))
                        lens.append(rng.randint(1, most))
                        budget -= lens[-1]
                if rng.random() < 0.04:
                    ids = [rng.randrange(ID_POOL, ID_POOL + 3)] + ids[:-1]  # unknown, first
                op = ["forward", ids, lens]

        t.copies = []
        error = None
        try:
            if op[0] == "add":
                t.call("kv_state_add_sequence", op[1])
            elif op[0] == "remove":
                t.call("kv_state_remove_sequence", op[1])
            elif op[0] == "fork":
                t.call("kv_state_fork_sequence", op[1], op[2], op[3])
            elif op[0] == "popn":
                t.call("kv_state_popn", op[1], op[2])
            elif op[0] == "clear":
                t.call("kv_state_clear")
            elif op[0] == "forward":
                t.call("kv_state_begin_forward", Shape(op[1]), Shape(op[2]))
        except Exception as e:  # pylint: disable=broad-except
            error = str(e).strip().splitlines()[-1][:200]
        record = {"op": op, "error": error is not None}
        if error is not None:
            record["message"] = error
            if op[0] in ("forward", "fork", "popn") and "KV cache is full" in error:
                pending_clear = True  # TVM changed part of its state: start again from empty
                record["partial"] = True  # what follows is TVM's half-changed state
        if op[0] == "forward" and error is None:
            positions = t.call("attention_kv_cache_get_query_positions").numpy().tolist()
            record["queryPositions"] = [int(x) for x in positions]
            t.call("kv_state_end_forward")
        # What TVM now holds: each sequence's length, from the op (TVM has no getter).
        if error is None:
            if op[0] == "add":
                lengths[op[1]] = 0
            elif op[0] == "remove":
                del lengths[op[1]]
            elif op[0] == "fork":
                lengths[op[2]] = lengths[op[1]] if op[3] == -1 else op[3]
            elif op[0] == "popn":
                lengths[op[1]] -= op[2]
            elif op[0] == "clear":
                lengths.clear()
            elif op[0] == "forward":
                for i, n in zip(op[1], op[2]):
                    lengths[i] += n
        record["freePages"] = int(t.call("attention_kv_cache_get_num_available_pages"))
        record["totalLength"] = int(t.call("attention_kv_cache_get_total_sequence_length"))
        if not pending_clear:
            assert record["totalLength"] == sum(lengths.values()), (op, record, lengths)
            h = 2166136261
            for i in sorted(lengths):
                h = fnv([i, lengths[i]] + t.position_map(i, lengths[i]), h)
            record["positionHash"] = h
        record["copies"] = t.copies
        records.append(record)

    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "tvm": tvm.__version__,
                "seed": seed,
                "config": CONFIG,
                "numPages": (CONFIG["max_total_seq_len"] + page - 1) // page + 1,
                "ops": records,
            },
            f,
            separators=(",", ":"),
        )
        f.write("\n")


if __name__ == "__main__":
    main()
