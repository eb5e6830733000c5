/**
 * PP-OCRv4 on relaxvm: the text detector, the direction classifier and the
 * recognizer that the `rapidocr-onnxruntime` wheel ships
 * (tools/fetch_ppocr.ts puts them in `.weights/ppocr-v4/`), each imported
 * with `importONNX` and run by a `VirtualMachine` on the device given, with
 * RapidOCR's pre- and post-processing (pre_post.ts).
 *
 * @example Read the text of an image (RGB pixels; examples/ocr.ts gets them from ImageMagick)
 * ```ts ignore
 * import { PPOCR } from "./models/ppocr/ocr.ts";
 *
 * using ocr = await PPOCR.load(".weights/ppocr-v4/");
 * for (const line of await ocr.read(image)) console.log(line.box, line.text);
 * ```
 *
 * @module
 */

import {
  type Device,
  type ImportedONNX,
  importONNX,
  type NDArray,
  tensor,
  VirtualMachine,
} from "../../mod.ts";
import { crop, type RGBImage, rotate180 } from "./image.ts";
import { ctcDecode, detectBoxes, detInput, lineBatch, recWidth, type TextBox } from "./pre_post.ts";

/** One line of text found in an image. */
export interface TextLine {
  /** Where it is, in image pixels. */
  box: TextBox;
  /** Whether the classifier found it upside down (it was turned before recognition). */
  rotated: boolean;
  /** What it says. */
  text: string;
  /** The mean probability of its characters. */
  score: number;
}

/** The models' input shapes: the classifier's fixed 48×192, the recognizer's height 48. */
export const PPOCR_INPUT_SHAPES = {
  det: { x: ["n", 3, "h", "w"] },
  cls: { x: ["n", 3, 48, 192] },
  rec: { x: ["n", 3, 48, "w"] },
} as const;

/** One imported model and its VM. */
export class PPOCRModel implements Disposable {
  readonly imported: ImportedONNX;
  readonly vm: VirtualMachine;

  constructor(imported: ImportedONNX, device?: Device) {
    this.imported = imported;
    this.vm = new VirtualMachine(imported.executable, device);
  }

  /** Runs the model on `data` of `shape`; returns its output's elements and shape. */
  async run(data: Float32Array, shape: number[]): Promise<{ data: Float32Array; shape: number[] }> {
    using x = tensor(data, { shape });
    // A model whose weights are all Constant nodes has no parameter tuple.
    const params = this.imported.params.length > 0 ? [this.imported.params] : [];
    using y = await this.vm.invoke("main", x, ...params) as NDArray;
    return { data: await y.data() as Float32Array, shape: [...y.shape] };
  }

  [Symbol.dispose](): void {
    this.vm.dispose();
    this.imported[Symbol.dispose]();
  }
}

/** The three PP-OCRv4 models, ready to read images. */
export class PPOCR implements Disposable {
  readonly det: PPOCRModel;
  readonly cls: PPOCRModel;
  readonly rec: PPOCRModel;
  /** The recognizer's character list (its model's `character` metadata). */
  readonly characters: readonly string[];

  private constructor(det: PPOCRModel, cls: PPOCRModel, rec: PPOCRModel) {
    this.det = det;
    this.cls = cls;
    this.rec = rec;
    const list = rec.imported.metadata.character;
    if (list === undefined) throw new Error("the recognizer has no `character` metadata");
    this.characters = list.split(/\r?\n/);
  }

  /**
   * Imports `det.onnx`, `cls.onnx` and `rec.onnx` from `dir` (a path ending
   * in `/` or a URL) for `device` (default: the CPU).
   */
  static async load(dir: string | URL, device?: Device): Promise<PPOCR> {
    const at = (name: string) => dir instanceof URL ? new URL(name, dir) : `${dir}${name}`;
    const [det, cls, rec] = await Promise.all(
      (["det", "cls", "rec"] as const).map((m) =>
        importONNX(at(`${m}.onnx`), { inputShapes: PPOCR_INPUT_SHAPES[m] })
      ),
    );
    return new PPOCR(
      new PPOCRModel(det, device),
      new PPOCRModel(cls, device),
      new PPOCRModel(rec, device),
    );
  }

  /** The text boxes of `image`, its longer side scaled to at most `maxSide` for the detector. */
  async detect(image: RGBImage, maxSide = 960): Promise<TextBox[]> {
    const input = detInput(image, maxSide);
    const { data, shape } = await this.det.run(input.data, input.shape);
    return detectBoxes(data, shape[2], shape[3], input, image.width, image.height);
  }

  /** For each crop, whether the classifier finds it upside down (label 180 above `thresh`). */
  async upsideDown(crops: readonly RGBImage[], thresh = 0.9): Promise<boolean[]> {
    if (crops.length === 0) return [];
    const { data } = await this.cls.run(lineBatch(crops, 192), [crops.length, 3, 48, 192]);
    return crops.map((_, i) => data[2 * i + 1] > data[2 * i] && data[2 * i + 1] > thresh);
  }

  /** The text of each line crop. */
  async recognize(crops: readonly RGBImage[]): Promise<{ text: string; score: number }[]> {
    if (crops.length === 0) return [];
    const width = recWidth(crops);
    const { data, shape } = await this.rec.run(lineBatch(crops, width), [
      crops.length,
      3,
      48,
      width,
    ]);
    return ctcDecode(data, shape[0], shape[1], shape[2], this.characters);
  }

  /** Detects, orients and recognizes every line of `image`. */
  async read(image: RGBImage): Promise<TextLine[]> {
    const boxes = await this.detect(image);
    let crops = boxes.map((b) => crop(image, b.x0, b.y0, b.x1, b.y1));
    const flipped = await this.upsideDown(crops);
    crops = crops.map((c, i) => flipped[i] ? rotate180(c) : c);
    const texts = await this.recognize(crops);
    return boxes.map((box, i) => ({ box, rotated: flipped[i], ...texts[i] }));
  }

  [Symbol.dispose](): void {
    this.det[Symbol.dispose]();
    this.cls[Symbol.dispose]();
    this.rec[Symbol.dispose]();
  }
}
