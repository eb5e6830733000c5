/**
 * Operands of the builder DSL: what `r()`, `c()`, `imm()`, `f()`,
 * `vm_state()` and `void_arg()` return. Opaque to users; two operands for the
 * same thing are deep-equal.
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { INSPECT } from "../ground/inspect.ts";

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

  /** Shown by `console.log` and `deno repl` as the call that makes it: `ib.r(2)`, `ib.imm(-1)`. */
  [INSPECT](): string {
    switch (this.kind) {
      case "register":
        return this.value === -2
          ? "ib.vm_state()"
          : this.value === -1
          ? "ib.void_arg()"
          : `ib.r(${this.value})`;
      case "immediate":
        return `ib.imm(${this.value})`;
      case "constant":
        return `ib.c(${this.value})`;
      case "function":
        return `ib.f(${JSON.stringify(this.value)})`;
    }
  }
}
