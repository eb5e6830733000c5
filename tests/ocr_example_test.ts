/**
 * examples/ocr.ts as a person runs it: it renders two lines with
 * ImageMagick, and must print them exactly and save the annotated picture;
 * and a picture of one's own, upside down, is turned and read.
 *
 * Needs the PP-OCRv4 weights (`bash tools/fetch_weights.sh`) and
 * ImageMagick with DejaVu Sans (`apt-get install imagemagick
 * fonts-dejavu-core`); ignored without them unless RELAXVM_REQUIRE_WEIGHTS=1
 * (CI) makes that a failure.
 *
 * @module
 */

import { assert, assertEquals } from "@std/assert";
import { assertLine } from "./_run_example.ts";
import { ignoreWithoutPPOCR } from "./_ocr_checks.ts";

const ROOT = new URL("../", import.meta.url);

/** Whether ImageMagick's convert runs here. */
async function hasImageMagick(): Promise<boolean> {
  try {
    const { stdout } = await new Deno.Command("convert", {
      args: ["-version"],
      stdout: "piped",
      stderr: "null",
    })
      .output();
    return new TextDecoder().decode(stdout).includes("ImageMagick");
  } catch {
    return false;
  }
}

const magick = await hasImageMagick();
const required = Deno.env.get("RELAXVM_REQUIRE_WEIGHTS") === "1";
if (!magick && !required) {
  console.log("ocr_example_test: ignored, ImageMagick's convert is not installed");
}

/** Runs the example with `args` and the permissions its usage names; its stdout. */
async function runOCR(...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--allow-read=.weights",
      "--allow-run=convert",
      "examples/ocr.ts",
      ...args,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(stdout);
  assertEquals(code, 0, `examples/ocr.ts failed:\n${out}${new TextDecoder().decode(stderr)}`);
  return out;
}

/** The text column of the example's result lines, in order. */
function texts(out: string): string[] {
  return out.split("\n").filter((l) => l.startsWith("[")).map((l) => l.split(/\s{2,}/).at(-1)!);
}

Deno.test({
  name: "examples/ocr.ts reads the lines it rendered exactly and saves the boxes drawn",
  ignore: ignoreWithoutPPOCR() || (!magick && !required),
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-ocr-" });
    try {
      const out = await runOCR("--device", "cpu", "--out", `${dir}/annotated.png`);
      assertEquals(texts(out), ["Hello from relaxvm", "PP-OCRv4 reads 2026"]);
      assertLine(out, `saved ${dir}/annotated.png with the boxes drawn`);
      assert((await Deno.stat(`${dir}/annotated.png`)).size > 0);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "examples/ocr.ts turns an upside-down picture of one's own around and reads it",
  ignore: ignoreWithoutPPOCR() || (!magick && !required),
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "relaxvm-ocr-" });
    try {
      const picture = `${dir}/upside_down.png`;
      const made = await new Deno.Command("convert", {
        args: [
          "-size",
          "420x80",
          "xc:white",
          "-font",
          "DejaVu-Sans",
          "-pointsize",
          "36",
          "-fill",
          "black",
        ]
          .concat(["-annotate", "+20+52", "Upside down 42", "-rotate", "180", picture]),
      }).output();
      assert(made.success, "convert could not render the picture");
      const out = await runOCR("--device", "cpu", "--out", `${dir}/out.png`, picture);
      assertEquals(texts(out), ["Upside down 42"]);
      assert(out.includes("(turned 180°)"), out);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
