/**
 * Reads the text in a picture with PP-OCRv4 (`models/ppocr/`): the text
 * detector finds the lines, the direction classifier turns upside-down ones
 * around, the recognizer reads each; all three are the ONNX models of the
 * `rapidocr-onnxruntime` wheel, imported with `importONNX` and run by
 * relaxvm. Prints each line's box and text and saves the picture with the
 * boxes drawn on it.
 *
 * ```sh
 * bash tools/fetch_weights.sh   # once: the models into .weights/ppocr-v4/
 * deno run --allow-read=.weights --allow-run=convert examples/ocr.ts [--device auto|webgpu|cpu] [--out FILE.png] [--text "line|line"] [IMAGE]
 * ```
 *
 * Without `IMAGE` it renders `--text` (lines split at `|`; default two
 * lines of its own) with ImageMagick in DejaVu Sans and reads that. Pictures
 * come in and go out through ImageMagick's `convert` (Debian's
 * `imagemagick`, with `fonts-dejavu-core` for the font), so any format it
 * knows works; `--out` (default `ocr.png`) is written by `convert` too.
 *
 * @module
 */

import { PPOCR } from "../models/ppocr/ocr.ts";
import { readPPM, type RGBImage } from "../models/ppocr/image.ts";
import { chooseDevice, DEVICE_CHOICES } from "./_choose_device.ts";

const USAGE =
  'usage: deno run --allow-read=.weights --allow-run=convert examples/ocr.ts [--device auto|webgpu|cpu] [--out FILE.png] [--text "line|line"] [IMAGE]';
const WEIGHTS = new URL("../.weights/ppocr-v4/", import.meta.url);
const DEFAULT_TEXT = "Hello from relaxvm|PP-OCRv4 reads 2026";

/** Runs ImageMagick's `convert` with `args`, feeding it `input`; resolves to its stdout. */
async function convert(args: string[], input?: Uint8Array): Promise<Uint8Array> {
  let child;
  try {
    child = new Deno.Command("convert", {
      args,
      stdin: input === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    throw new Error(
      `cannot run ImageMagick's convert (${(e as Error).message}): install it ` +
        `(apt-get install imagemagick fonts-dejavu-core) and allow it with --allow-run=convert`,
    );
  }
  if (input !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(input);
    await writer.close();
  }
  const { success, stdout, stderr } = await child.output();
  if (!success) throw new Error(`convert ${args.join(" ")}: ${new TextDecoder().decode(stderr)}`);
  return stdout;
}

/** `lines` of black DejaVu Sans on white, as RGB pixels. */
async function render(lines: string[]): Promise<RGBImage> {
  const size = 40, lineHeight = 64;
  const width = Math.max(...lines.map((l) => l.length)) * Math.ceil(size * 0.65) + 2 * size;
  const args = ["-size", `${width}x${lines.length * lineHeight + size}`, "xc:white"];
  args.push("-font", "DejaVu-Sans", "-pointsize", String(size), "-fill", "black");
  lines.forEach((line, i) => args.push("-annotate", `+${size}+${(i + 1) * lineHeight}`, line));
  return readPPM(await convert([...args, "-depth", "8", "ppm:-"]));
}

/** The PPM bytes of `image`. */
function ppm(image: RGBImage): Uint8Array {
  const header = new TextEncoder().encode(`P6\n${image.width} ${image.height}\n255\n`);
  const out = new Uint8Array(header.length + image.data.length);
  out.set(header);
  out.set(image.data, header.length);
  return out;
}

const args = [...Deno.args];
let device = "auto", out = "ocr.png", text = DEFAULT_TEXT, path: string | undefined;
while (args.length > 0) {
  const arg = args.shift()!;
  if (arg === "--help" || arg === "-h") {
    console.log(USAGE);
    Deno.exit(0);
  }
  const value = () => {
    const v = args.shift();
    if (v === undefined) throw new Error(`${arg} needs a value\n${USAGE}`);
    return v;
  };
  if (arg === "--device") {
    device = value();
    if (!(DEVICE_CHOICES as readonly string[]).includes(device)) {
      throw new Error(`--device takes ${DEVICE_CHOICES.join(", ")}, not ${device}\n${USAGE}`);
    }
  } else if (arg === "--out") out = value();
  else if (arg === "--text") text = value();
  else if (arg.startsWith("-")) throw new Error(`unknown option ${arg}\n${USAGE}`);
  else path = arg;
}

const image = path === undefined ? await render(text.split("|")) : readPPM(
  await convert([path, "-background", "white", "-alpha", "remove", "-depth", "8", "ppm:-"]),
);
console.log(`image: ${path ?? `rendered "${text}"`}, ${image.width}×${image.height}`);
using ocr = await PPOCR.load(WEIGHTS, await chooseDevice(device));
const start = performance.now();
const lines = await ocr.read(image);
console.log(`${lines.length} line(s) in ${Math.round(performance.now() - start)} ms:`);
for (const { box, text, score, rotated } of lines) {
  const where = `[${box.x0}, ${box.y0}, ${box.x1}, ${box.y1}]`.padEnd(22);
  console.log(`${where} ${score.toFixed(3)}${rotated ? " (turned 180°)" : ""}  ${text}`);
}
const draw = lines.flatMap(({ box }) => [
  "-draw",
  `rectangle ${box.x0},${box.y0} ${box.x1 - 1},${box.y1 - 1}`,
]);
await convert(
  ["ppm:-", "-fill", "none", "-stroke", "red", "-strokewidth", "2", ...draw, out],
  ppm(image),
);
console.log(`saved ${out} with the boxes drawn`);
