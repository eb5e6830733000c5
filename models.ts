/**
 * The models written with relaxvm's builder, as a library: all-MiniLM-L6-v2
 * sentence embeddings (`MiniLMSession`, with its trained weights), the
 * GPT-2-style decoder (`GPTSession`, seeded weights made in memory), the
 * lande language identifier (`LandeSession`), Silero VAD voice activity
 * detection imported from its ONNX files (`SileroVAD`, `speechSegments`,
 * `readWav`), and `TVMLanguageModel`, a
 * TVM-compiled language model (MLC LLM's functions) for `Engine`. Import this entry point
 * (`@relaxvm/relaxvm/models`) beside the library; the library's own entry
 * points and its browser bundle do not carry the models.
 *
 * Each session runs on `preferredDevice()` unless given a `device`: WebGPU on
 * a hardware adapter, the CPU kernels on a software one or none.
 *
 * @example Semantic search over your own sentences
 * ```ts
 * import { cosine, MiniLMSession } from "@relaxvm/relaxvm/models";
 *
 * if (import.meta.main) { // needs the weights: bash tools/fetch_weights.sh
 *   const session = await MiniLMSession.create(new URL("./.weights/all-MiniLM-L6-v2/", import.meta.url));
 *   const [query, ...corpus] = await session.embed(["How do I bake bread?", "Knead the dough.", "Stocks fell."]);
 *   console.log(corpus.map((v) => cosine(query, v))); // the first is higher
 *   session.dispose();
 * }
 * ```
 *
 * @module
 */

export { cosine, MiniLMSession, padBatch } from "./models/minilm/session.ts";
export type { MiniLMSessionOptions, PaddedBatch } from "./models/minilm/session.ts";
export { buildMiniLM } from "./models/minilm/program.ts";
export { MINILM_L6 } from "./models/minilm/config.ts";
export type { MiniLMConfig } from "./models/minilm/config.ts";
export { WordPieceTokenizer } from "./models/minilm/tokenizer.ts";
export type { TokenizerJSON } from "./models/minilm/tokenizer.ts";
export { argmax, GPTSession, pick } from "./models/gpt/session.ts";
export type { GPTSessionOptions, SamplingOptions } from "./models/gpt/session.ts";
export { buildGPT } from "./models/gpt/program.ts";
export { ByteTokenizer, PagedGPT } from "./models/gpt/paged_session.ts";
export type { PagedGPTOptions } from "./models/gpt/paged_session.ts";
export { buildPagedGPT } from "./models/gpt/paged_program.ts";
export { CONFIGS, SMALL, TEXT, TINY } from "./models/gpt/config.ts";
export type { GPTConfig } from "./models/gpt/config.ts";
export { LandeSession } from "./models/lande/session.ts";
export { SileroVAD } from "./models/silero_vad/session.ts";
export type { SileroVADOptions } from "./models/silero_vad/session.ts";
export { speechSegments } from "./models/silero_vad/segments.ts";
export type { SegmentOptions, SpeechSegment } from "./models/silero_vad/segments.ts";
export { readWav, resample, WavError } from "./models/silero_vad/wav.ts";
export type { Wav } from "./models/silero_vad/wav.ts";
export { TVMLanguageModel } from "./models/tvm_llm/model.ts";
export type { TVMLanguageModelOptions } from "./models/tvm_llm/model.ts";
// The library's types the sessions' signatures name, so that this entry point documents them.
export type { Device, Executable, NDArray, VirtualMachine } from "./mod.ts";
