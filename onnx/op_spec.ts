/**
 * The shape of an operator's entry in the importer's table: the attributes
 * it understands (any other is reported as unsupported before conversion
 * starts) and the converter that records its calls.
 *
 * @module
 */

import type { TensorDType } from "../ground/dtype.ts";
import type { Value } from "./graph_values.ts";
import type { NodeContext } from "./node_context.ts";

/** One operator the importer converts. */
export interface OpSpec {
  /** Attributes it reads; a node with another one is unsupported. */
  readonly attrs: readonly string[];
  /** Records the node's calls; returns its outputs in order (`undefined`: not produced). */
  convert(cx: NodeContext): (Value | undefined)[];
}

/** Dtypes relaxvm's arithmetic operators compute. */
export const ARITH: readonly TensorDType[] = ["float32", "int32", "int64"];
/** Dtypes its transcendental and matrix operators compute. */
export const FLOAT: readonly TensorDType[] = ["float32"];
