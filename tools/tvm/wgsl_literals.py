"""Float literals in TVM's WGSL, printed exactly.

TVM 0.27's WebGPU codegen prints a float32 literal with seven significant digits (`%e`): 8/7
becomes `1.142857e+00f`, not the float32 nearest 8/7 that TVM's `llvm` build uses, and
nearest-neighbour resize of 8 to 7 columns then rounds (3 + 0.5) * 1.142857 - 0.5 = 3.4999995
down where llvm reaches 3.5 (tests/tvm_ops/expectations.ts had it as tvm-float-literals). The
kernel's TIR holds each literal's value (a FloatImm), so `exact_float_literals` rewrites every
literal whose printed digits are not that value to the shortest decimal that reads back as the
same float32; literals already exact are left as TVM wrote them.
"""

import re

from fractions import Fraction

import numpy as np
import tvm_ffi
from tvm import tirx

# TVM's `%e` literal, with the minus of a negative FloatImm; not part of a longer token.
LITERAL = re.compile(r"(?<![\w.])(-?)(\d\.\d{6}e[+-]\d{2,3})f(?![\w.])")


class AmbiguousLiteral(Exception):
    """Two float32 values of one kernel print as the same literal."""


def float32_values(func):
    """The values of the float32 FloatImms of a TIR function."""
    found = []

    def visit(imm):
        ty = getattr(imm, "ty", None)
        if str(getattr(ty, "dtype", ty)) == "float32" and np.isfinite(imm.value):
            found.append(float(imm.value))

    tvm_ffi.structural_walk(func.body, [(tirx.FloatImm, visit)])
    return found


def exact_float_literals(wgsl, values):
    """`wgsl` with each `%e` float32 literal of a value in `values` printed exactly.

    A literal is matched to the FloatImm it was printed from by its text (TVM prints the double
    the FloatImm holds; its float32 prints the same but for a tie, so both are keys). Raises
    AmbiguousLiteral when two different float32 values print alike, since then which is meant
    is unknown; returns the source and how many literals changed.
    """
    by_text = {}
    for v in values:
        f = np.float32(v)
        for text in {"%e" % v, "%e" % float(f)}:
            by_text.setdefault(text, set()).add(f)
    changed = 0

    def exact(match):
        nonlocal changed
        sign, digits = match.group(1), match.group(2)
        text = sign + digits
        if text not in by_text and sign and digits in by_text:
            text = digits  # a unary minus before a positive literal
        else:
            sign = ""
        floats = by_text.get(text)
        if not floats:
            return match.group(0)
        if len(floats) > 1:
            raise AmbiguousLiteral(f"float32 values {sorted(float(f) for f in floats)} all print "
                                   f"as {text}f")
        f = next(iter(floats))
        if np.float32(float(text)) == f:
            return match.group(0)
        changed += 1
        return sign + wgsl_float32(f)

    return LITERAL.sub(exact, wgsl), changed


FLOAT32_MAX = Fraction(float(np.finfo(np.float32).max))


def wgsl_float32(f):
    """The WGSL literal of float32 `f`: its shortest decimal that reads back as it.

    WGSL takes a literal's exact value and rejects one past float32's largest finite value
    (Chromium's Tint: "value cannot be represented as 'f32'"), though it would round to it;
    the shortest decimal of that largest value, 3.4028235e+38, is such a literal, so it is
    written as the hexadecimal float it is.
    """
    text = np.format_float_scientific(f, unique=True, trim="0")
    if abs(Fraction(text)) > FLOAT32_MAX:
        return float(f).hex().replace("0000000p", "p") + "f"
    return text + "f"
