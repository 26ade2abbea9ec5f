// Zstandard (FORMAT.md §3): one frame that records its content size. Node 20's zlib has no zstd, so this runs
// zstd's own C code compiled to WebAssembly (@bokuweb/zstd-wasm, loaded once at import). Before the wasm decoder
// sees a byte we read the frame header ourselves (content size present and ≤ max_size) and walk the blocks to
// check that the payload is exactly one frame, so the decoder only ever writes into a buffer of the declared size.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { InvalidEntry } from "./errors.js";

interface ZstdModule {
  _malloc(n: number): number;
  _free(p: number): void;
  _ZSTD_compress(dst: number, cap: number, src: number, n: number, level: number): number;
  _ZSTD_compressBound(n: number): number;
  _ZSTD_decompress(dst: number, cap: number, src: number, n: number): number;
  _ZSTD_isError(code: number): number;
  HEAPU8: Uint8Array;
}

const require = createRequire(import.meta.url);
const binding = require("@bokuweb/zstd-wasm") as { init(): Promise<void> };
// The package exports only its simple functions; its emscripten Module (malloc, ZSTD_decompress with our own
// buffer sizes) sits beside its entry point, reached by absolute path.
const moduleHolder = require(join(dirname(require.resolve("@bokuweb/zstd-wasm")), "module.js")) as {
  Module: ZstdModule;
};
await binding.init();
const zstd = moduleHolder.Module;

export const ZSTD_DEFAULT_LEVEL = 3;

function corrupt(why: string): never {
  throw new InvalidEntry("corrupt_payload", `zstd: ${why}`);
}

export function zstdCompress(data: Uint8Array, level = ZSTD_DEFAULT_LEVEL): Uint8Array {
  const bound = zstd._ZSTD_compressBound(data.length);
  const src = zstd._malloc(Math.max(1, data.length));
  const dst = zstd._malloc(bound);
  try {
    zstd.HEAPU8.set(data, src);
    const n = zstd._ZSTD_compress(dst, bound, src, data.length, level);
    if (zstd._ZSTD_isError(n)) throw new Error(`zstd compression failed (code ${n})`);
    return zstd.HEAPU8.slice(dst, dst + n);
  } finally {
    zstd._free(src);
    zstd._free(dst);
  }
}

/** The content size a frame header records, and the header's length; corrupt_payload when there is none. */
export function zstdFrameHeader(data: Uint8Array): { contentSize: number; headerLength: number; checksum: boolean } {
  if (data.length < 5) corrupt("not a zstd frame (too short)");
  if (data[0] !== 0x28 || data[1] !== 0xb5 || data[2] !== 0x2f || data[3] !== 0xfd) corrupt("not a zstd frame");
  const fhd = data[4] as number;
  const fcsFlag = fhd >>> 6;
  const singleSegment = (fhd >>> 5) & 1;
  if ((fhd >>> 3) & 1) corrupt("reserved bit set in the frame header");
  const checksum = ((fhd >>> 2) & 1) === 1;
  const dictIdBytes = [0, 1, 2, 4][fhd & 3] as number;
  const fcsBytes = fcsFlag === 0 ? singleSegment : ([1, 2, 4, 8][fcsFlag] as number);
  if (fcsBytes === 0) corrupt("the frame does not record its content size");
  let pos = 5 + (singleSegment ? 0 : 1) + dictIdBytes;
  if (pos + fcsBytes > data.length) corrupt("frame header cut short");
  let size = 0;
  for (let i = 0; i < fcsBytes; i++) size += (data[pos + i] as number) * 2 ** (8 * i);
  if (fcsBytes === 2) size += 256;
  pos += fcsBytes;
  return { contentSize: size, headerLength: pos, checksum };
}

/** The length of the frame at the start of `data` (header, blocks, checksum), by walking its block headers. */
function frameLength(data: Uint8Array, headerLength: number, checksum: boolean): number {
  let pos = headerLength;
  for (;;) {
    if (pos + 3 > data.length) corrupt("frame cut short");
    const header = (data[pos] as number) | ((data[pos + 1] as number) << 8) | ((data[pos + 2] as number) << 16);
    pos += 3;
    const last = header & 1;
    const type = (header >>> 1) & 3;
    const size = header >>> 3;
    if (type === 3) corrupt("reserved block type");
    pos += type === 1 ? 1 : size;
    if (pos > data.length) corrupt("frame cut short");
    if (last) break;
  }
  if (checksum) pos += 4;
  if (pos > data.length) corrupt("frame cut short");
  return pos;
}

export function zstdDecompress(data: Uint8Array, maxSize: number): Uint8Array {
  const { contentSize, headerLength, checksum } = zstdFrameHeader(data);
  if (contentSize > maxSize)
    throw new InvalidEntry("too_large", `payload of ${contentSize} bytes exceeds the ${maxSize}-byte limit`);
  const length = frameLength(data, headerLength, checksum);
  if (length !== data.length) corrupt(`${data.length - length} bytes after the frame`);
  const src = zstd._malloc(Math.max(1, data.length));
  const dst = zstd._malloc(Math.max(1, contentSize));
  try {
    zstd.HEAPU8.set(data, src);
    const n = zstd._ZSTD_decompress(dst, contentSize, src, data.length);
    if (zstd._ZSTD_isError(n)) corrupt(`the frame does not decode (code ${n})`);
    if (n !== contentSize) corrupt(`decoded to ${n} bytes, header declared ${contentSize}`);
    return zstd.HEAPU8.slice(dst, dst + n);
  } finally {
    zstd._free(src);
    zstd._free(dst);
  }
}
