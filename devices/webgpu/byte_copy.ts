/**
 * A byte-granular copy kernel, for the transfers `copyBufferToBuffer` and
 * `queue.writeBuffer` refuse: both demand offsets and sizes that are
 * multiples of 4 bytes, while an 8- or 16-bit tensor (or one placed by
 * `alloc_tensor` at an odd offset) can start and end anywhere. Each thread
 * owns one destination word and rewrites only the bytes inside the target
 * range, so bytes of a neighbouring tensor sharing that word survive.
 *
 * @module
 */

import {
  groupsFor,
  mainHeader,
  type Program,
  storage,
  Uniforms,
  uniformStruct,
  WORKGROUP_SIZE,
} from "./kernel_program.ts";

/**
 * A program copying `nbytes` from byte `srcByte` of binding 0 to byte
 * `dstByte` of binding 1 (two different buffers).
 */
export function byteCopyProgram(srcByte: number, dstByte: number, nbytes: number): Program {
  const firstWord = Math.floor(dstByte / 4);
  const words = Math.ceil((dstByte + nbytes) / 4) - firstWord;
  return {
    key: "byte_copy",
    source: () =>
      storage(0, "src", "u32", false) + storage(1, "dst", "u32", true) +
      uniformStruct(["firstWord", "words", "dstByte", "srcByte", "nbytes"], 2) +
      mainHeader(WORKGROUP_SIZE) + `
  let i = wg * ${WORKGROUP_SIZE}u + lid;
  if (i >= u.words) { return; }
  let w = u.firstWord + i;
  var word = dst[w];
  for (var j = 0u; j < 4u; j++) {
    let b = w * 4u + j;
    if (b >= u.dstByte && b - u.dstByte < u.nbytes) {
      let s = b - u.dstByte + u.srcByte;
      let v = (src[s >> 2u] >> ((s & 3u) * 8u)) & 0xffu;
      word = (word & ~(0xffu << (j * 8u))) | (v << (j * 8u));
    }
  }
  dst[w] = word;
}
`,
    inputs: 1,
    uniforms: new Uniforms().u32s([firstWord, words, dstByte, srcByte, nbytes]).words(),
    workgroups: groupsFor(words, WORKGROUP_SIZE),
  };
}
