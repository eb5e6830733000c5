/**
 * The little image handling OCR needs, on 8-bit RGB pixels in memory: read
 * a binary PPM (what `convert FILE ppm:-` prints, so any format ImageMagick
 * reads comes in that way), bilinear resizing as OpenCV's `INTER_LINEAR`
 * computes it (half-pixel centres, edges clamped), crops and a half turn.
 * No file or process access: the example does that.
 *
 * @module
 */

/** An 8-bit RGB image, row by row, three bytes a pixel. */
export interface RGBImage {
  readonly width: number;
  readonly height: number;
  readonly data: Uint8Array;
}

/**
 * Parses a binary PPM (`P6`, maxval 255), as `convert FILE ppm:-` writes
 * it, or a binary PGM (`P5`, grey), whose pixels become grey RGB.
 */
export function readPPM(bytes: Uint8Array): RGBImage {
  let at = 0;
  const token = (): string => {
    for (;;) {
      while (at < bytes.length && /\s/.test(String.fromCharCode(bytes[at]))) at++;
      if (bytes[at] !== 0x23) break; // '#' starts a comment line
      while (at < bytes.length && bytes[at] !== 0x0a) at++;
    }
    const start = at;
    while (at < bytes.length && !/\s/.test(String.fromCharCode(bytes[at]))) at++;
    return new TextDecoder().decode(bytes.subarray(start, at));
  };
  const magic = token(), width = Number(token()), height = Number(token()), max = Number(token());
  if ((magic !== "P6" && magic !== "P5") || !(width > 0) || !(height > 0) || max !== 255) {
    throw new Error(`not an 8-bit binary PPM or PGM (header ${magic} ${width} ${height} ${max})`);
  }
  at++; // the one whitespace byte after maxval
  const channels = magic === "P6" ? 3 : 1;
  const pixels = bytes.subarray(at, at + width * height * channels);
  if (pixels.length !== width * height * channels) throw new Error("the pixels are cut short");
  if (channels === 3) return { width, height, data: pixels.slice() };
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.fill(pixels[i], 3 * i, 3 * i + 3);
  return { width, height, data };
}

/** `image` resized to `width` × `height`, bilinear with half-pixel centres (OpenCV's `INTER_LINEAR`). */
export function resizeBilinear(image: RGBImage, width: number, height: number): RGBImage {
  const out = new Uint8Array(width * height * 3);
  const sx = image.width / width, sy = image.height / height;
  const src = image.data, W = image.width, H = image.height;
  for (let y = 0; y < height; y++) {
    const fy = Math.max(0, (y + 0.5) * sy - 0.5);
    const y0 = Math.min(H - 1, Math.floor(fy)), y1 = Math.min(H - 1, y0 + 1), wy = fy - y0;
    for (let x = 0; x < width; x++) {
      const fx = Math.max(0, (x + 0.5) * sx - 0.5);
      const x0 = Math.min(W - 1, Math.floor(fx)), x1 = Math.min(W - 1, x0 + 1), wx = fx - x0;
      for (let c = 0; c < 3; c++) {
        const a = src[(y0 * W + x0) * 3 + c], b = src[(y0 * W + x1) * 3 + c];
        const d = src[(y1 * W + x0) * 3 + c], e = src[(y1 * W + x1) * 3 + c];
        const top = a + (b - a) * wx, bottom = d + (e - d) * wx;
        out[(y * width + x) * 3 + c] = Math.round(top + (bottom - top) * wy);
      }
    }
  }
  return { width, height, data: out };
}

/** The pixels of `image` in the rectangle `[x0, x1) × [y0, y1)`, clamped to the image. */
export function crop(image: RGBImage, x0: number, y0: number, x1: number, y1: number): RGBImage {
  const left = Math.max(0, Math.floor(x0)), top = Math.max(0, Math.floor(y0));
  const right = Math.min(image.width, Math.ceil(x1)),
    bottom = Math.min(image.height, Math.ceil(y1));
  const width = Math.max(1, right - left), height = Math.max(1, bottom - top);
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const from = ((top + y) * image.width + left) * 3;
    data.set(image.data.subarray(from, from + width * 3), y * width * 3);
  }
  return { width, height, data };
}

/** `image` turned by 180°. */
export function rotate180(image: RGBImage): RGBImage {
  const n = image.width * image.height, data = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) data.set(image.data.subarray(i * 3, i * 3 + 3), (n - 1 - i) * 3);
  return { width: image.width, height: image.height, data };
}
