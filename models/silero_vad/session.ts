/**
 * `SileroVAD`: Silero VAD (the silero-vad wheel's ONNX files,
 * `tools/fetch_silero_vad.ts`) imported with `importONNX` and run chunk by
 * chunk, as the package's own `OnnxWrapper` runs it: each call takes 512
 * samples at 16 kHz (256 at 8 kHz) after the previous call's last 64 (32),
 * and the LSTM's state `[2, 1, 128]` comes back out to go into the next
 * call. The state stays on the device between calls; only the probability
 * is read back.
 *
 * @module
 */

import { cpu, type Device, importONNX, type NDArray, tensor, VirtualMachine } from "../../mod.ts";

/** Options of `SileroVAD.create`. */
export interface SileroVADOptions {
  /** Where it runs (default: the CPU). */
  device?: Device;
  /** 16000 (default) or 8000; the 16 kHz-only variants take 16000 alone. */
  sampleRate?: 8000 | 16000;
}

/** Silero VAD on a device, with its recurrent state and audio context carried across calls. */
export class SileroVAD implements Disposable {
  /** The VM running the imported model. */
  readonly vm: VirtualMachine;
  /** Samples per call (512 at 16 kHz, 256 at 8 kHz). */
  readonly chunkSize: number;
  /** Samples of the previous chunk each call also sees (64, 32). */
  readonly contextSize: number;
  /** Samples per second. */
  readonly sampleRate: number;
  readonly #device: Device;
  readonly #params: NDArray[];
  readonly #inputNames: readonly string[];
  readonly #dispose: () => void;
  #state: NDArray | null = null;
  #context: Float32Array;

  private constructor(
    vm: VirtualMachine,
    device: Device,
    params: NDArray[],
    inputNames: readonly string[],
    sampleRate: number,
    dispose: () => void,
  ) {
    this.vm = vm;
    this.#device = device;
    this.#params = params;
    this.#inputNames = inputNames;
    this.sampleRate = sampleRate;
    this.chunkSize = sampleRate === 16000 ? 512 : 256;
    this.contextSize = sampleRate === 16000 ? 64 : 32;
    this.#context = new Float32Array(this.contextSize);
    this.#dispose = dispose;
  }

  /**
   * Imports a Silero VAD ONNX file (its path, URL or bytes) for chunks of
   * `sampleRate`: the input's length is fixed at import (`inputShapes`), and
   * the `sr` input, where the variant has one, is bound (`inputValues`), so
   * its `If`s on the rate fold away.
   *
   * @example
   * ```ts ignore
   * using vad = await SileroVAD.create(".weights/silero-vad/silero_vad.onnx");
   * const p = await vad.probability(new Float32Array(512)); // the next 32 ms of 16 kHz audio
   * ```
   */
  static async create(
    source: string | URL | Uint8Array,
    options: SileroVADOptions = {},
  ): Promise<SileroVAD> {
    const sampleRate = options.sampleRate ?? 16000;
    const device = options.device ?? cpu();
    const chunk = sampleRate === 16000 ? 576 : 288;
    using sr = tensor(new BigInt64Array([BigInt(sampleRate)]), { shape: [] });
    const model = await importONNX(source, {
      inputShapes: { input: [1, chunk], state: [2, 1, 128] },
      inputValues: { sr },
    });
    const names = model.inputs.map((i) => i.name);
    if (names.join() !== "input,state" && names.join() !== "state,input") {
      model[Symbol.dispose]();
      throw new Error(`not a streaming Silero VAD model: its inputs are ${names.join(", ")}`);
    }
    const params = device.deviceType === cpu().deviceType
      ? [...model.params]
      : await Promise.all(model.params.map((p) => p.copyTo(device)));
    const dispose = () => {
      if (params[0] !== model.params[0]) { for (const p of params) p.dispose(); }
      model[Symbol.dispose]();
    };
    return new SileroVAD(
      new VirtualMachine(model.executable, device),
      device,
      params,
      names,
      sampleRate,
      dispose,
    );
  }

  /** Forgets the state and context: the next chunk starts a new stream. */
  reset(): void {
    this.#state?.dispose();
    this.#state = null;
    this.#context = new Float32Array(this.contextSize);
  }

  /** The recurrent state `[2, 1, 128]` after the last chunk (zeros before the first). */
  async state(): Promise<Float32Array> {
    if (this.#state === null) return new Float32Array(2 * 128);
    return new Float32Array(await this.#state.data() as Float32Array);
  }

  /** The probability that `chunk` (`chunkSize` samples, the stream's next) is speech. */
  async probability(chunk: Float32Array): Promise<number> {
    if (chunk.length !== this.chunkSize) {
      throw new RangeError(
        `a chunk of ${chunk.length} samples; Silero VAD takes ${this.chunkSize}`,
      );
    }
    const x = new Float32Array(this.contextSize + this.chunkSize);
    x.set(this.#context);
    x.set(chunk, this.contextSize);
    this.#context = x.slice(x.length - this.contextSize);
    using input = tensor(x, { shape: [1, x.length] });
    const state = this.#state ?? tensor(new Float32Array(2 * 128), { shape: [2, 1, 128] });
    const feeds: Record<string, NDArray> = { input, state };
    const args: unknown[] = this.#inputNames.map((n) => feeds[n]);
    if (this.#params.length > 0) args.push(this.#params);
    let out: NDArray[];
    try {
      out = await this.vm.invoke("main", ...args) as NDArray[];
    } finally {
      state.dispose();
      this.#state = null;
    }
    const [prob, next] = out;
    this.#state = next;
    try {
      return (await prob.data() as Float32Array)[0];
    } finally {
      prob.dispose();
    }
  }

  /** The speech probability of each whole chunk of `audio`, from a fresh stream. */
  async probabilities(audio: Float32Array): Promise<Float32Array> {
    this.reset();
    const n = Math.floor(audio.length / this.chunkSize);
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      out[i] = await this.probability(audio.subarray(i * this.chunkSize, (i + 1) * this.chunkSize));
    }
    return out;
  }

  /** The device it runs on. */
  get device(): Device {
    return this.#device;
  }

  /** Frees the state, the weights and the imported model. */
  [Symbol.dispose](): void {
    this.#state?.dispose();
    this.#state = null;
    this.#dispose();
  }
}
