// LZ4 in larder's form (FORMAT.md §3): a u32 little-endian uncompressed length, then one LZ4 block. The decoder is
// our own so that every bound is checked here (the prefix against max_size and against what a block can expand
// to, every literal and match against the declared length), whatever the bytes. The encoder is lz4-napi's (lz4_flex,
// the Rust crate, as a prebuilt Node binding in an optional dependency; it writes exactly this form) where it
// loads, else lz4js's in JavaScript: on 64 KiB of text lz4-napi took 8-150 µs against lz4js's 350-600 µs, more than a
// network round trip, on every write of a large value.

import { createRequire } from "node:module";
import lz4js from "lz4js";
import { InvalidEntry } from "./errors.js";

type NativeCompress = (data: Buffer) => Buffer;

/** lz4-napi's `compressSync`, or undefined where the optional dependency or its binary for this platform is missing. */
const nativeCompress: NativeCompress | undefined = (() => {
  if (process.env.LARDER_LZ4 === "js") return undefined;
  try {
    return (createRequire(import.meta.url)("lz4-napi") as { compressSync: NativeCompress }).compressSync;
  } catch {
    return undefined;
  }
})();

/** Which encoder writes LZ4 here: "native" (lz4-napi) or "js" (lz4js); LARDER_LZ4=js chooses lz4js. */
export const lz4Encoder: "native" | "js" = nativeCompress ? "native" : "js";

/** The most an LZ4 block can expand: 255 output bytes per input byte, plus 16. */
export const LZ4_MAX_RATIO = 255;

// One hash table for every call, cleared before each: compressBlock trusts a slot that points at or past the
// current position (a stale slot from an earlier input gave a zero offset: found by the round-trip property test).
const hashTable = new Uint32Array(1 << 16);

export function lz4Compress(data: Uint8Array): Uint8Array {
  if (nativeCompress && data.length > 0) {
    const out = nativeCompress(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    // Its form is larder's (a u32 LE length, then the block); a binding that wrote anything else is not used.
    if (out.length >= 4 && out.readUInt32LE(0) === data.length) return out;
  }
  return lz4CompressJs(data);
}

/** lz4js's block behind the length prefix (also what runs without lz4-napi). */
export function lz4CompressJs(data: Uint8Array): Uint8Array {
  const bound = lz4js.compressBound(data.length);
  const out = new Uint8Array(4 + bound);
  new DataView(out.buffer).setUint32(0, data.length, true);
  hashTable.fill(0);
  const n = data.length === 0 ? 0 : lz4js.compressBlock(data, out.subarray(4), 0, data.length, hashTable);
  if (n === 0) {
    // lz4js gives up on incompressible input: write it as one literal run, which is a valid block.
    return lz4Literals(data, out.subarray(0, 4));
  }
  return out.slice(0, 4 + n);
}

function lz4Literals(data: Uint8Array, prefix: Uint8Array): Uint8Array {
  const lengthBytes: number[] = [];
  let token: number;
  if (data.length < 15) token = data.length << 4;
  else {
    token = 0xf0;
    let rest = data.length - 15;
    while (rest >= 255) {
      lengthBytes.push(255);
      rest -= 255;
    }
    lengthBytes.push(rest);
  }
  const out = new Uint8Array(4 + 1 + lengthBytes.length + data.length);
  out.set(prefix, 0);
  out[4] = token;
  out.set(lengthBytes, 5);
  out.set(data, 5 + lengthBytes.length);
  return out;
}

export function lz4Decompress(data: Uint8Array, maxSize: number): Uint8Array {
  if (data.length < 4)
    throw new InvalidEntry("corrupt_payload", `lz4 payload of ${data.length} bytes has no size prefix`);
  const declared = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(0, true);
  if (declared > maxSize)
    throw new InvalidEntry("too_large", `payload of ${declared} bytes exceeds the ${maxSize}-byte limit`);
  const src = data.subarray(4);
  if (declared > LZ4_MAX_RATIO * src.length + 16)
    throw new InvalidEntry(
      "corrupt_payload",
      `lz4 size prefix claims ${declared} bytes from a ${src.length}-byte block, more than LZ4 can expand`,
    );
  const out = new Uint8Array(declared);
  const end = src.length;
  let ip = 0;
  let op = 0;
  const corrupt = (why: string): never => {
    throw new InvalidEntry("corrupt_payload", `lz4 block: ${why}`);
  };
  while (ip < end) {
    const token = src[ip++] as number;
    let literals = token >>> 4;
    if (literals === 15) {
      for (;;) {
        if (ip >= end) corrupt("literal length cut short");
        const b = src[ip++] as number;
        literals += b;
        if (b !== 255) break;
      }
    }
    if (ip + literals > end) corrupt("literals past the end of the block");
    if (op + literals > declared) corrupt("output longer than the size prefix");
    out.set(src.subarray(ip, ip + literals), op);
    ip += literals;
    op += literals;
    if (ip === end) break;
    if (ip + 2 > end) corrupt("match offset cut short");
    const offset = (src[ip] as number) | ((src[ip + 1] as number) << 8);
    ip += 2;
    if (offset === 0 || offset > op) corrupt("match offset outside the output");
    let length = token & 15;
    if (length === 15) {
      for (;;) {
        if (ip >= end) corrupt("match length cut short");
        const b = src[ip++] as number;
        length += b;
        if (b !== 255) break;
      }
    }
    length += 4;
    if (op + length > declared) corrupt("output longer than the size prefix");
    if (offset >= length) {
      out.copyWithin(op, op - offset, op - offset + length);
      op += length;
    } else if (length < 32) {
      for (let from = op - offset, i = 0; i < length; i++) out[op++] = out[from++] as number;
    } else {
      // A match that overlaps its own output repeats the last `offset` bytes: copy them in runs that double (the
      // output is periodic in `offset`, so in every multiple of it), not byte by byte (a run of one repeated byte,
      // 64 KiB long, took 512 µs a byte at a time).
      const until = op + length;
      for (let period = offset; op < until; ) {
        const run = Math.min(period, until - op);
        out.copyWithin(op, op - period, op - period + run);
        op += run;
        period += run;
      }
    }
  }
  if (op !== declared) corrupt(`decoded to ${op} bytes, prefix declared ${declared}`);
  return out;
}
