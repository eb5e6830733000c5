"""PyTorch on CUDA as the hardware reference for bench/gpu_bench.ts.

Prints JSON: {"device": ..., "ops": {case name: ms per op, ..., "wait": ms}}.
Every per-op figure is a slope, as in gpu_bench.ts: the op run n1 and n2
times between CUDA events, (t2 - t1) / (n2 - n1). The case names match
gpu_bench.ts's, so its table can show the figures side by side.

    python3 bench/torch_reference.py --full   # the issue's sizes
    python3 bench/torch_reference.py --quick  # the software-adapter sizes

Exits with 1 (and prints nothing) where PyTorch or CUDA is missing.
"""

import json
import statistics
import sys
import time

try:
    import torch
except ImportError:
    sys.exit(1)
if not torch.cuda.is_available():
    sys.exit(1)

torch.backends.cuda.matmul.allow_tf32 = False  # plain f32, as relaxvm computes
torch.backends.cudnn.allow_tf32 = False
FULL = "--quick" not in sys.argv
N = 4096 if FULL else 512
K = 4096 if FULL else 1024
ADD = (1 << 24) if FULL else (1 << 22)
dev = torch.device("cuda")


def run_ms(fn, n, rounds=7):
    """Median ms of n calls of fn between two CUDA events."""
    times = []
    for _ in range(rounds + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(n):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times[2:])


def slope(fn, counts):
    n1, n2 = counts
    return (run_ms(fn, n2) - run_ms(fn, n1)) / (n2 - n1)


def case(shape_a, shape_b, op):
    a = torch.rand(*shape_a, device=dev, dtype=torch.float32)
    b = torch.rand(*shape_b, device=dev, dtype=torch.float32)
    return lambda: op(a, b)


ops = {
    f"matmul {N}³ f32": slope(case((N, N), (N, N), torch.matmul), (2, 6) if FULL else (1, 5)),
    "matmul 256³ f32": slope(case((256, 256), (256, 256), torch.matmul), (4, 24)),
    f"GEMV 1×{K} · {K}×{K} f32": slope(case((1, K), (K, K), torch.matmul), (4, 24)),
    f"add {ADD >> 20}M f32": slope(case((ADD,), (ADD,), torch.add), (2, 10)),
}

# One wait: a tiny kernel, then the host waits for it.
tiny = torch.ones(4, device=dev)
waits = []
for _ in range(50):
    start = time.perf_counter()
    tiny.add_(1)
    torch.cuda.synchronize()
    waits.append((time.perf_counter() - start) * 1000)
ops["wait"] = statistics.median(waits[5:])

print(json.dumps({"device": torch.cuda.get_device_name(0), "ops": ops}))
