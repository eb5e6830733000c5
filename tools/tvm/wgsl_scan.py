"""TVM's WebGPU scan (cumsum, cumprod) with the barrier its WGSL lacks.

TVM 0.27's scan kernels add up a workgroup array in Hillis-Steele steps, each step one block

    workgroupBarrier();
    if (2i <= i32(threadIdx.x)) {
      shared_buf[v + 0] = (vec4(shared_buf[v + 0], ...) + vec4(shared_buf[(IDX - 5i)], ...))[0];
      ...
    }

in which a thread reads the slot `IDX - 5` that another thread of the same step writes. Nothing
orders the two (WGSL promises no lockstep): a GPU running 32 lanes together happens to read
first, Mesa's llvmpipe (8 lanes at a time) does not, and cumsum went wrong from a row's 33rd
element on (tests/tvm_ops/expectations.ts had it as scan-over-32). `scan_barriers` makes each
such step read the neighbour into a `let` before a barrier of its own, then write:

    workgroupBarrier();
    let relaxvm_scan_3 : f32 = shared_buf[max(IDX - 5i, 0i)];
    workgroupBarrier();
    if (2i <= i32(threadIdx.x)) { ... relaxvm_scan_3 ... }

The new barrier sits beside the one TVM put before the step, so it is in uniform control flow
when that one is; every thread reads (clamped to the array), and only those TVM's condition
admits use the value.
"""

import re

STEP = re.compile(r"^( *)workgroupBarrier\(\);\n\1if \((\d+)i <= i32\(threadIdx\.x\)\) \{\n",
                  re.MULTILINE)


class UnfixedScan(Exception):
    """A scan step whose shape `scan_barriers` does not know."""


def _indexed(body, array):
    """(start, end, index text) of each `array[...]` in body, brackets matched."""
    out = []
    for m in re.finditer(rf"(?<!\w){re.escape(array)}\[", body):
        depth, i = 1, m.end()
        while depth:
            depth += {"[": 1, "]": -1}.get(body[i], 0)
            i += 1
        out.append((m.start(), i, body[m.end():i - 1]))
    return out


def scan_barriers(wgsl):
    """`wgsl` with each of TVM's racing scan steps split by a barrier; how many it split.

    Raises UnfixedScan for a step that reads another thread's slot of a workgroup array it
    writes in a shape other than TVM's, since that kernel would race as TVM wrote it.
    """
    arrays = dict(re.findall(r"var<workgroup>\s+(\w+)\s*:\s*array<(\w+),", wgsl))
    out, at, fixed = [], 0, 0
    for m in STEP.finditer(wgsl):
        indent = m.group(1)
        end = wgsl.index(f"\n{indent}}}\n", m.end())
        body = wgsl[m.end():end]
        for array, element in arrays.items():
            if not re.search(rf"(?<!\w){re.escape(array)}\[[^\]]*\] =", body):
                continue  # the step writes no slot of this array
            reads = {idx for _, _, idx in _indexed(body, array)
                     if re.fullmatch(r"\(.* - \d+i\)", idx)}
            if not reads:
                continue
            local = set(re.findall(r"\blet (\w+)", body))
            if len(reads) != 1 or any(re.search(rf"\b{v}\b", next(iter(reads))) for v in local):
                raise UnfixedScan(f"a scan step under `if ({m.group(2)}i <= "
                                  f"i32(threadIdx.x))` reads {sorted(reads)} of {array}, which "
                                  "it writes, with no barrier between")
            idx = next(iter(reads))
            name = f"relaxvm_scan_{fixed}"
            fixed += 1
            body = body.replace(f"{array}[{idx}]", name)
            # The barrier TVM wrote, the read, a barrier of ours, then TVM's step reading the let.
            head = wgsl[m.start():m.end()]
            barrier, _, cond = head.partition("\n")
            out.append(wgsl[at:m.start()])
            out.append(f"{barrier}\n{indent}let {name} : {element} = "
                       f"{array}[max({idx[1:-1]}, 0i)];\n{indent}workgroupBarrier();\n{cond}")
            out.append(body)
            at = end
            break
    out.append(wgsl[at:])
    return "".join(out), fixed
