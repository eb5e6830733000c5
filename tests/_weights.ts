/**
 * Tests of real models need weights that are not in the repository:
 * `tools/fetch_weights.sh` downloads and converts them into `.weights/`
 * (CI runs it). Without them those tests are ignored with a message saying
 * how to get them, or fail when `RELAXVM_REQUIRE_WEIGHTS=1`.
 *
 * @module
 */

/** The command that fetches every model's weights. */
export const FETCH_WEIGHTS = "bash tools/fetch_weights.sh";

/** A model's directory under `.weights/`. */
export function weightsDir(name: string): URL {
  return new URL(`../.weights/${name}/`, import.meta.url);
}

function present(dir: URL, files: readonly string[]): boolean {
  try {
    for (const f of files) Deno.statSync(new URL(f, dir));
    return true;
  } catch {
    return false;
  }
}

function required(): boolean {
  try {
    return Deno.env.get("RELAXVM_REQUIRE_WEIGHTS") === "1";
  } catch {
    return false; // no --allow-env: treat as unset
  }
}

const warned = new Set<string>();
/**
 * Whether tests needing `files` in `dir` are ignored: they are absent and
 * `RELAXVM_REQUIRE_WEIGHTS` is not 1. Says how to get them, once per model.
 */
export function ignoreWithoutWeights(model: string, dir: URL, files: readonly string[]): boolean {
  if (present(dir, files) || required()) return false;
  if (!warned.has(model)) {
    console.warn(
      `${model}'s weights are not in .weights/: its tests are ignored. Get them with\n  ${FETCH_WEIGHTS}`,
    );
    warned.add(model);
  }
  return true;
}

/** Throws, saying how to get them, when `files` are absent from `dir`. */
export function requireWeights(model: string, dir: URL, files: readonly string[]): void {
  if (!present(dir, files)) {
    throw new Error(
      `RELAXVM_REQUIRE_WEIGHTS=1 but ${model}'s weights are not in .weights/: run\n  ${FETCH_WEIGHTS}`,
    );
  }
}
