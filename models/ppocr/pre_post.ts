/**
 * PP-OCR's pre- and post-processing, as RapidOCR 1.4.4 (the wheel the
 * models come from, tools/fetch_ppocr.ts) and PaddleOCR do it, on plain
 * arrays:
 *
 * - **Detection input**: the image scaled so its longer side is at most
 *   `maxSide` (PaddleOCR's `limit_type: max`), each side rounded to a
 *   multiple of 32, in BGR order (OpenCV's), normalized to `p/127.5 − 1`.
 * - **Boxes** (DB post-processing): the probability map thresholded at
 *   0.3, dilated by a 2×2 square, split into 8-connected components; each
 *   component's bounding box scored by the mean probability inside it
 *   (`score_mode: fast`), kept at 0.5 or more, grown by the DB "unclip"
 *   distance `area · 1.6 / perimeter` on every side and mapped back to the
 *   image. Components stand in for OpenCV's contours and minimum-area
 *   rectangles, which is the same box for level text.
 * - **Classifier and recognizer inputs**: each crop scaled to height 48
 *   (width by its aspect ratio, at most the input's width), normalized to
 *   `p/127.5 − 1`, zero-padded on the right: width 192 for the direction
 *   classifier, `48 · max(320/48, widest ratio)` for the recognizer.
 * - **CTC greedy decoding**: each time step's most probable class, repeats
 *   merged, blanks (class 0) dropped; classes 1… are the model's character
 *   list and the last is a space.
 *
 * @module
 */

import { resizeBilinear, type RGBImage } from "./image.ts";

/** A detected text box in image pixels, `[x0, x1) × [y0, y1)`, with its mean probability. */
export interface TextBox {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
  score: number;
}

/** The detector's input and how its pixels map back to the image's. */
export interface DetInput {
  data: Float32Array;
  shape: [1, 3, number, number];
  /** Image pixels per input pixel, horizontally and vertically. */
  scaleX: number;
  scaleY: number;
}

/** Planar BGR of `image` normalized to `p/127.5 − 1` into `out` at `offset`, `width` wide. */
function normalizeInto(image: RGBImage, out: Float32Array, offset: number, width: number): void {
  const { width: w, height: h, data } = image, plane = h * width;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const p = (y * w + x) * 3, o = offset + y * width + x;
      // BGR: the models were trained on OpenCV's channel order.
      out[o] = data[p + 2] / 127.5 - 1;
      out[o + plane] = data[p + 1] / 127.5 - 1;
      out[o + 2 * plane] = data[p] / 127.5 - 1;
    }
  }
}

/** The detector's input for `image`, its longer side at most `maxSide`. */
export function detInput(image: RGBImage, maxSide = 960): DetInput {
  const ratio = Math.min(1, maxSide / Math.max(image.width, image.height));
  const round32 = (v: number) => Math.max(32, Math.round(v * ratio / 32) * 32);
  const w = round32(image.width), h = round32(image.height);
  const resized = resizeBilinear(image, w, h);
  const data = new Float32Array(3 * h * w);
  normalizeInto(resized, data, 0, w);
  return { data, shape: [1, 3, h, w], scaleX: image.width / w, scaleY: image.height / h };
}

/** DB post-processing of the detector's map `prob [H, W]` (see the module's comment). */
export function detectBoxes(
  prob: Float32Array,
  H: number,
  W: number,
  input: Pick<DetInput, "scaleX" | "scaleY">,
  imageWidth: number,
  imageHeight: number,
  { thresh = 0.3, boxThresh = 0.5, unclipRatio = 1.6, minSize = 3 } = {},
): TextBox[] {
  // Threshold, then dilate by a 2×2 square (OpenCV's anchor: the pixel and those above and left).
  const bitmap = new Uint8Array(H * W);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const at = (yy: number, xx: number) => yy >= 0 && xx >= 0 && prob[yy * W + xx] > thresh;
      if (at(y, x) || at(y - 1, x) || at(y, x - 1) || at(y - 1, x - 1)) bitmap[y * W + x] = 1;
    }
  }
  const label = new Int32Array(H * W).fill(-1);
  const boxes: TextBox[] = [];
  const stack: number[] = [];
  for (let start = 0; start < H * W; start++) {
    if (bitmap[start] === 0 || label[start] >= 0) continue;
    let x0 = W, y0 = H, x1 = -1, y1 = -1;
    label[start] = boxes.length;
    stack.push(start);
    while (stack.length > 0) {
      const p = stack.pop()!, py = Math.floor(p / W), px = p - py * W;
      x0 = Math.min(x0, px), x1 = Math.max(x1, px), y0 = Math.min(y0, py), y1 = Math.max(y1, py);
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const ny = py + dy, nx = px + dx, q = ny * W + nx;
          if (ny < 0 || ny >= H || nx < 0 || nx >= W || bitmap[q] === 0 || label[q] >= 0) continue;
          label[q] = label[start];
          stack.push(q);
        }
      }
    }
    const w = x1 - x0 + 1, h = y1 - y0 + 1;
    if (Math.min(w, h) < minSize) continue;
    let sum = 0;
    for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) sum += prob[y * W + x];
    const score = sum / (w * h);
    if (score < boxThresh) continue;
    const d = w * h * unclipRatio / (2 * (w + h));
    if (Math.min(w, h) + 2 * d < minSize + 2) continue;
    boxes.push({
      x0: Math.max(0, Math.round((x0 - d) * input.scaleX)),
      y0: Math.max(0, Math.round((y0 - d) * input.scaleY)),
      x1: Math.min(imageWidth, Math.round((x1 + 1 + d) * input.scaleX)),
      y1: Math.min(imageHeight, Math.round((y1 + 1 + d) * input.scaleY)),
      score,
    });
  }
  // Reading order: top to bottom, then left to right on a line.
  return boxes.sort((a, b) => Math.abs(a.y0 - b.y0) < 10 ? a.x0 - b.x0 : a.y0 - b.y0);
}

/**
 * Crops scaled to height 48 and normalized into one batch `[n, 3, 48, width]`,
 * zero-padded on the right (`width` 192 for the classifier; for the
 * recognizer `recWidth(crops)`).
 */
export function lineBatch(crops: readonly RGBImage[], width: number): Float32Array {
  const H = 48, plane = H * width;
  const data = new Float32Array(crops.length * 3 * plane);
  crops.forEach((crop, i) => {
    const w = Math.min(width, Math.ceil(H * crop.width / crop.height));
    normalizeInto(resizeBilinear(crop, w, H), data, i * 3 * plane, width);
  });
  return data;
}

/** The recognizer's input width for `crops`: 48 × the widest aspect ratio, at least 320. */
export function recWidth(crops: readonly RGBImage[]): number {
  let ratio = 320 / 48;
  for (const c of crops) ratio = Math.max(ratio, c.width / c.height);
  return Math.floor(48 * ratio);
}

/**
 * CTC greedy decoding of `probs [n, T, C]`: per line, the text and the mean
 * probability of its characters. `characters` is the model's list (class
 * `i + 1`); class 0 is the blank and class `C − 1` a space.
 */
export function ctcDecode(
  probs: Float32Array,
  n: number,
  T: number,
  C: number,
  characters: readonly string[],
): { text: string; score: number }[] {
  if (characters.length + 2 !== C) {
    throw new Error(`${characters.length} characters for ${C} classes (expected C − 2)`);
  }
  const out: { text: string; score: number }[] = [];
  for (let i = 0; i < n; i++) {
    let text = "", total = 0, count = 0, previous = -1;
    for (let t = 0; t < T; t++) {
      const row = (i * T + t) * C;
      let best = 0;
      for (let c = 1; c < C; c++) if (probs[row + c] > probs[row + best]) best = c;
      if (best !== 0 && best !== previous) {
        text += best === C - 1 ? " " : characters[best - 1];
        total += probs[row + best];
        count++;
      }
      previous = best;
    }
    out.push({ text, score: count === 0 ? 0 : total / count });
  }
  return out;
}
