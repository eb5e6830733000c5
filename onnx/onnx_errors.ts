/**
 * The errors of the ONNX importer: `ONNXImportError` for a file that cannot be
 * read (truncated, malformed protobuf, inconsistent tensors: with the byte
 * offset where reading stopped) and `UnsupportedONNXError` for a well-formed
 * model that uses operators or attributes relaxvm does not implement (every
 * such node listed at once, before anything is built or run).
 *
 * @module
 */

import { brand, type Branded, brandKey } from "../ground/brand.ts";
import { cut, MAX_MESSAGE_CHARS, MAX_REASON_CHARS, printable } from "../ground/printable.ts";

const IMPORT_ERROR_BRAND = brandKey("ONNXImportError");

/**
 * Thrown by `importONNX` for bytes that are not a model it can read: the
 * message says what is wrong, in which message of the file (`section`:
 * `ModelProto.graph.node[3]`, …) and at which byte offset. Nothing is loaded.
 *
 * @example A truncated file
 * ```ts
 * import { importONNX, ONNXImportError } from "@relaxvm/relaxvm";
 * import { assertRejects } from "@std/assert";
 *
 * await assertRejects(() => importONNX(new Uint8Array([0x3a, 0x05, 0x0a])), ONNXImportError);
 * ```
 */
export class ONNXImportError extends Error {
  static {
    brand(this, IMPORT_ERROR_BRAND);
  }

  /**
   * True for an `ONNXImportError` of any copy of relaxvm (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is ONNXImportError {
    return typeof v === "object" && v !== null && (v as Branded)[IMPORT_ERROR_BRAND] === true;
  }

  /** The message being read, as a path from `ModelProto` (`ModelProto.graph.node[2]`). */
  readonly section: string;
  /** Byte offset in the file where the problem was found (-1 when it is not about bytes). */
  readonly offset: number;

  /** Builds the error; the message names the section and the byte offset. */
  constructor(section: string, offset: number, reason: string, options?: ErrorOptions) {
    super(
      `Cannot import ONNX model: ${cut(reason, MAX_REASON_CHARS)} (${cut(printable(section), 500)}${
        offset >= 0 ? `, byte offset ${offset}` : ""
      })`,
      options,
    );
    this.name = "ONNXImportError";
    this.section = section;
    this.offset = offset;
  }
}

/** One node relaxvm cannot import, and why. */
export interface UnsupportedNode {
  /** The node's name (`""` when the file gives none). */
  readonly name: string;
  /** `op_type`, with its domain when that is not the standard one (`com.microsoft.Gelu`). */
  readonly op: string;
  /** What is missing: the operator, an attribute, a dtype, an input that must be constant. */
  readonly reason: string;
}

const UNSUPPORTED_BRAND = brandKey("UnsupportedONNXError");

/** How many nodes an `UnsupportedONNXError`'s message lists; `nodes` holds them all. */
const NODES_LISTED = 100;

/**
 * Thrown by `importONNX` before anything is built when the model uses
 * operators, attributes or dtypes the importer does not support: `nodes`
 * lists every one (a file with 40 unsupported nodes gives one error with 40
 * entries, not 40 attempts).
 *
 * @example
 * ```ts
 * import { UnsupportedONNXError } from "@relaxvm/relaxvm";
 * const e = new UnsupportedONNXError([{ name: "n0", op: "Foo", reason: "operator Foo" }]);
 * console.assert(e.nodes.length === 1);
 * ```
 */
export class UnsupportedONNXError extends Error {
  static {
    brand(this, UNSUPPORTED_BRAND);
  }

  /**
   * True for an `UnsupportedONNXError` of any copy of relaxvm (ground/brand.ts).
   *
   * @ignore
   */
  static override [Symbol.hasInstance](v: unknown): v is UnsupportedONNXError {
    return typeof v === "object" && v !== null && (v as Branded)[UNSUPPORTED_BRAND] === true;
  }

  /** Every node that cannot be imported, in graph order. */
  readonly nodes: readonly UnsupportedNode[];

  /** Builds the error from the list of nodes. */
  constructor(nodes: readonly UnsupportedNode[]) {
    const lines = nodes.slice(0, NODES_LISTED).map((n) =>
      `  - ${n.name === "" ? "(unnamed)" : cut(printable(n.name), 200)} (${
        cut(printable(n.op), 200)
      }): ${cut(n.reason, 500)}`
    );
    if (nodes.length > lines.length) {
      lines.push(
        `  … and ${nodes.length - lines.length} more (the error's \`nodes\` lists them all)`,
      );
    }
    super(
      cut(
        `Cannot import ONNX model: ${nodes.length} node${
          nodes.length === 1 ? "" : "s"
        } not supported\n${lines.join("\n")}`,
        MAX_MESSAGE_CHARS,
      ),
    );
    this.name = "UnsupportedONNXError";
    this.nodes = nodes;
  }
}
