/**
 * NumPy broadcasting and the stride arithmetic kernels walk tensors with.
 * Shared by the operator front end (output shapes, error messages) and the
 * kernels of every device (index math), so both agree on one rule set.
 *
 * Shapes align at their trailing axes; two sizes are compatible when they are
 * equal or one of them is 1, and a missing leading axis counts as 1.
 *
 * @module
 */

/**
 * Formats a shape the way every operator message does: `[2, 3]`, `[]`.
 *
 * @example
 * ```ts
 * import { formatShape } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(formatShape([2, 3]), "[2, 3]");
 * assertEquals(formatShape([]), "[]");
 * ```
 */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/**
 * The broadcast shape of `a` and `b`, or `undefined` when they do not
 * broadcast.
 *
 * @example
 * ```ts
 * import { tryBroadcastShapes } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(tryBroadcastShapes([2, 1, 4], [3, 1]), [2, 3, 4]);
 * assertEquals(tryBroadcastShapes([2, 3], [4]), undefined);
 * ```
 */
export function tryBroadcastShapes(
  a: readonly number[],
  b: readonly number[],
): number[] | undefined {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    // Walk from the trailing axis; a missing axis has size 1.
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) return undefined;
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/**
 * The broadcast shape of `a` and `b`; throws a `RangeError` naming both
 * shapes when they do not broadcast (and the operator `who`, when given,
 * as builtins' messages start).
 *
 * @example
 * ```ts
 * import { broadcastShapes } from "./broadcast.ts";
 * import { assertEquals, assertThrows } from "@std/assert";
 *
 * assertEquals(broadcastShapes([5, 1], [1, 7]), [5, 7]);
 * assertThrows(() => broadcastShapes([2, 3], [4]), RangeError, "[2, 3] and [4]");
 * ```
 */
export function broadcastShapes(
  a: readonly number[],
  b: readonly number[],
  who?: string,
): number[] {
  const out = tryBroadcastShapes(a, b);
  if (out === undefined) {
    const shapes = `${formatShape(a)} and ${formatShape(b)} do not broadcast`;
    throw new RangeError(who === undefined ? `Shapes ${shapes}` : `${who}: shapes ${shapes}`);
  }
  return out;
}

/**
 * Element strides of a contiguous row-major tensor of `shape`.
 *
 * @example
 * ```ts
 * import { contiguousStrides } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(contiguousStrides([2, 3, 4]), [12, 4, 1]);
 * ```
 */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

/**
 * Element strides for reading a contiguous tensor of `shape` as if it had
 * the (broadcast) shape `outShape`: one stride per axis of `outShape`, 0 on
 * the axes where `shape` has size 1 or lacks the axis, so the same element is
 * read again.
 *
 * @example
 * ```ts
 * import { broadcastStrides } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(broadcastStrides([3, 1], [2, 3, 4]), [0, 1, 0]);
 * ```
 */
export function broadcastStrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const own = contiguousStrides(shape);
  const offset = outShape.length - shape.length;
  const strides = new Array<number>(outShape.length).fill(0);
  for (let i = 0; i < shape.length; i++) {
    if (shape[i] !== 1) strides[offset + i] = own[i];
  }
  return strides;
}

/** A shape and one stride list per operand, after `collapseDims`. */
export interface CollapsedDims {
  /** The merged shape; never empty (a scalar becomes `[1]`). */
  shape: number[];
  /** For each operand, its strides over `shape`. */
  strides: number[][];
}

/**
 * Simplifies an iteration space: drops size-1 axes and merges neighbouring
 * axes that every operand walks as one (its outer stride equals inner stride
 * times inner size). Kernels then loop over as few, as long axes as possible:
 * two same-shape operands collapse to one flat axis, a bias add to two.
 *
 * @example
 * ```ts
 * import { collapseDims } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * // [2, 3, 4] + [4]: the leading two axes merge; the bias repeats.
 * assertEquals(collapseDims([2, 3, 4], [[12, 4, 1], [0, 0, 1]]), {
 *   shape: [6, 4],
 *   strides: [[4, 1], [0, 1]],
 * });
 * ```
 */
export function collapseDims(
  shape: readonly number[],
  strides: readonly (readonly number[])[],
): CollapsedDims {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let axis = 0; axis < shape.length; axis++) {
    const size = shape[axis];
    if (size === 1) continue;
    const last = outShape.length - 1;
    const mergeable = last >= 0 &&
      strides.every((s, k) => outStrides[k][last] === s[axis] * size);
    if (mergeable) {
      outShape[last] *= size;
      for (let k = 0; k < strides.length; k++) outStrides[k][last] = strides[k][axis];
    } else {
      outShape.push(size);
      for (let k = 0; k < strides.length; k++) outStrides[k].push(strides[k][axis]);
    }
  }
  if (outShape.length === 0) {
    outShape.push(1);
    for (const s of outStrides) s.push(0);
  }
  return { shape: outShape, strides: outStrides };
}

/**
 * True when two shapes have the same dimensions (identical arrays first: tensor shapes are frozen
 * and often shared).
 *
 * @example
 * ```ts
 * import { sameShape } from "./broadcast.ts";
 * import { assertEquals } from "@std/assert";
 *
 * assertEquals(sameShape([2, 3], [2, 3]), true);
 * assertEquals(sameShape([2, 3], [3, 2]), false);
 * ```
 */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Everything about broadcasting two operand shapes that does not depend on
 * their values, dtype or device: the output shape and the collapsed walk
 * (`collapseDims` of both operands' broadcast strides) a kernel follows.
 */
export interface BroadcastPlan {
  /** The left operand's shape (frozen). */
  readonly a: readonly number[];
  /** The right operand's shape (frozen). */
  readonly b: readonly number[];
  /** The broadcast output shape (frozen, so tensors can share it). */
  readonly shape: readonly number[];
  /** Elements of the output. */
  readonly size: number;
  /** The iteration space (`collapseDims`), with the strides of `a` then `b`; frozen. */
  readonly walk: {
    readonly shape: readonly number[];
    readonly strides: readonly (readonly number[])[];
  };
}

/** Plans kept by `broadcastPlan`: a small ring, most programs use a handful of shape pairs. */
const PLAN_SLOTS = 16;
const plans: (BroadcastPlan | undefined)[] = new Array(PLAN_SLOTS).fill(undefined);
let lastPlan = 0;
let nextSlot = 0;

function frozenCopy(shape: readonly number[]): readonly number[] {
  return Object.isFrozen(shape) ? shape : Object.freeze([...shape]);
}

function planFor(a: readonly number[], b: readonly number[]): BroadcastPlan | undefined {
  const shape = tryBroadcastShapes(a, b);
  if (shape === undefined) return undefined;
  let size = 1;
  for (const d of shape) size *= d;
  const walk = collapseDims(shape, [broadcastStrides(a, shape), broadcastStrides(b, shape)]);
  Object.freeze(walk.shape);
  walk.strides.forEach(Object.freeze);
  return {
    a: frozenCopy(a),
    b: frozenCopy(b),
    shape: Object.freeze(shape),
    size,
    walk: Object.freeze(walk),
  };
}

/**
 * The broadcast plan for operand shapes `a` and `b`, or `undefined` when
 * they do not broadcast. Plans are cached (the last 16 shape pairs), so an
 * operator called again on the same shapes — every iteration of a program,
 * and the kernel after the front end — computes nothing: a hit compares the
 * shapes, by identity first (tensor shapes are frozen) and else element by
 * element. Keys are frozen copies, so a caller mutating its array later
 * cannot make a stale plan match.
 *
 * @example
 * ```ts
 * import { broadcastPlan } from "./broadcast.ts";
 * import { assertEquals, assertStrictEquals } from "@std/assert";
 *
 * const plan = broadcastPlan([2, 3, 4], [4])!;
 * assertEquals(plan.shape, [2, 3, 4]);
 * assertEquals(plan.walk, { shape: [6, 4], strides: [[4, 1], [0, 1]] });
 * assertStrictEquals(broadcastPlan([2, 3, 4], [4]), plan); // cached
 * assertEquals(broadcastPlan([2, 3], [4]), undefined);
 * ```
 */
export function broadcastPlan(
  a: readonly number[],
  b: readonly number[],
): BroadcastPlan | undefined {
  const last = plans[lastPlan];
  if (last !== undefined && sameShape(last.a, a) && sameShape(last.b, b)) return last;
  for (let i = 0; i < PLAN_SLOTS; i++) {
    const p = plans[i];
    if (p === undefined) break;
    if (sameShape(p.a, a) && sameShape(p.b, b)) {
      lastPlan = i;
      return p;
    }
  }
  const plan = planFor(a, b);
  if (plan !== undefined) {
    lastPlan = nextSlot;
    plans[nextSlot] = plan;
    nextSlot = (nextSlot + 1) % PLAN_SLOTS;
  }
  return plan;
}
