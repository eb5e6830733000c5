/**
 * `printable()`: how names from an executable are shown. Function names and
 * other strings in a loaded file are data an attacker may choose; printed
 * raw, a name holding a newline fakes instructions in a listing, and one
 * holding terminal escapes rewrites the user's screen. Every place that
 * shows such a name (dumps, error messages, the CLI) passes it through
 * here: ordinary names are unchanged, invisible and control characters
 * become `\n`, `\x1b`, `\u202e`, … escapes.
 *
 * `cut()` bounds what a message embeds of such data (a name, a string, a
 * list), so that no error of relaxvm is longer than `MAX_MESSAGE_CHARS`.
 *
 * @module
 */

/**
 * The most characters an error message of relaxvm holds (64 KiB): what a
 * program or a file chose (names, strings, lists of problems) is cut to fit.
 */
export const MAX_MESSAGE_CHARS = 65_536;

/** Characters of a name (a function, a file, a record) shown in a message. */
export const MAX_NAME_CHARS = 500;

/** Characters of a reason (a builtin's message, a loader's) shown in a message. */
export const MAX_REASON_CHARS = 4000;

/** `text`, cut to `max` characters with a note of how many more there were. */
export function cut(text: string, max: number): string {
  return text.length <= max
    ? text
    : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/** C0 and C1 controls, DEL, line and paragraph separators, bidirectional overrides and isolates. */
// deno-lint-ignore no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\" };

/** `name` with every unprintable character escaped (and `\` doubled when anything was escaped). */
export function printable(name: string): string {
  UNPRINTABLE.lastIndex = 0;
  if (!UNPRINTABLE.test(name)) return name;
  return name.replace(/[\\]/g, "\\\\").replace(UNPRINTABLE, (c) => {
    if (NAMED[c] !== undefined) return NAMED[c];
    const code = c.charCodeAt(0);
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** What `JSON.stringify` leaves raw that a terminal or an editor would act on. */
const RAW_AFTER_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;

/**
 * `JSON.stringify(text)` with the characters it leaves raw but a terminal or
 * an editor obeys (C1 controls such as `\x9b`, which starts an escape
 * sequence, DEL, line separators, bidirectional overrides) written as
 * `\uXXXX` too: the same JavaScript string literal, safe to print.
 */
export function quoted(text: string): string {
  return JSON.stringify(text).replace(
    RAW_AFTER_JSON,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
