/**
 * `OptionalHasElement` and `OptionalGetElement` where the optional is known
 * at import: no input (or `""`) is an empty optional, a tensor a full one.
 * Values of ONNX's optional type (graph inputs, `Optional`) are not
 * supported, so whether it holds an element is always known here.
 *
 * @module
 */

import { tensor } from "../devices/tensor.ts";
import type { OpSpec } from "./op_spec.ts";

/** The operators of this module, by ONNX name. */
export const OPTIONAL_OPS: Record<string, OpSpec> = {
  OptionalHasElement: {
    attrs: [],
    convert(cx) {
      const present = cx.inputCount > 0 && cx.optional(0) !== undefined;
      const t = tensor(new Uint8Array([present ? 1 : 0]), { dtype: "bool", shape: [] });
      cx.made.push(t);
      return [cx.fromTensor(t)];
    },
  },
  OptionalGetElement: {
    attrs: [],
    convert(cx) {
      const x = cx.input(0);
      return [cx.em.call("vm.op.cast", [cx.em.reg(x), x.dtype], x.dtype, x.shape)];
    },
  },
};
