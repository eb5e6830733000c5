/**
 * The text form of a convolution's epilogue, `vm.op.conv2d`'s `epilogue`
 * argument: steps separated by spaces, each `name(a, b)` (`relu` and
 * `sigmoid` alone),
 * applied in order to every output after the bias; see
 * `Conv2dEpilogueStep` for what each computes. A string, so an executable
 * holds it as one constant; parsed once per distinct text.
 *
 * ```text
 * affine(2.1116, 1.0563) hardswish(3, 6) affine(0.1828, -0.2009)
 * ```
 *
 * @module
 */

import type { Conv2dEpilogueStep } from "../../kernels/kernel_backend.ts";

export type { Conv2dEpilogueStep };

const STEP = /^(affine|clip|hardsigmoid|hardswish)\(([^,()]+),([^,()]+)\)$|^(relu|sigmoid)$/;

// Parsed texts: a model writes a handful, each called per image.
const parsed = new Map<string, readonly Conv2dEpilogueStep[]>();

/** The steps `text` names; a `RangeError` naming `op` for text that is not a list of steps. */
export function parseConvEpilogue(op: string, text: string): readonly Conv2dEpilogueStep[] {
  const known = parsed.get(text);
  if (known !== undefined) return known;
  const steps = text.trim() === ""
    ? []
    : text.trim().replace(/\s*([(,])\s*/g, "$1").replace(/\s+\)/g, ")").split(/\s+/)
      .map((word) => {
        const m = STEP.exec(word);
        const a = m === null || m[1] === undefined ? 0 : Number(m[2]);
        const b = m === null || m[1] === undefined ? 0 : Number(m[3]);
        if (m === null || Number.isNaN(a) || Number.isNaN(b)) {
          throw new RangeError(
            `${op}: epilogue step "${word}" is not relu, sigmoid or affine/clip/hardsigmoid/hardswish(a, b)`,
          );
        }
        return { op: (m[1] ?? m[4]) as Conv2dEpilogueStep["op"], a, b };
      });
  if (parsed.size < 4096) parsed.set(text, steps);
  return steps;
}

/** The text `parseConvEpilogue` reads back as `steps` (numbers written exactly). */
export function formatConvEpilogue(steps: readonly Conv2dEpilogueStep[]): string {
  return steps.map((s) => s.op === "relu" || s.op === "sigmoid" ? s.op : `${s.op}(${s.a}, ${s.b})`)
    .join(" ");
}
