/**
 * Operands of the builder DSL: what `r()`, `c()`, `imm()`, `f()`,
 * `vm_state()` and `void_arg()` return. Opaque to users; two operands for the
 * same thing are deep-equal.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";

/** What an operand refers to. */
export type OperandKind = "register" | "immediate" | "constant" | "function";

const OPERAND_BRAND = brandKey("Operand");

/** A register, immediate, constant-pool index or function reference. */
export class Operand {
  static {
    brand(this, OPERAND_BRAND);
  }

  /**
   * True for an `Operand` of any copy of relaxvm, not only this one (ground/brand.ts).
   *
   * @ignore
   */
  static [Symbol.hasInstance](v: unknown): v is Operand {
    return typeof v === "object" && v !== null && (v as Branded)[OPERAND_BRAND] === true;
  }

  /** What the operand refers to. */
  readonly kind: OperandKind;
  /** Register number, immediate value, constant index or function name. */
  readonly value: number | string;

  /**
   * Use the `ExecBuilder` methods instead.
   *
   * @ignore
   */
  constructor(kind: OperandKind, value: number | string) {
    this.kind = kind;
    this.value = value;
  }
}
