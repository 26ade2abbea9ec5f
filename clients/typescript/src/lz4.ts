// LZ4 in larder's form (FORMAT.md §3): a u32 little-endian uncompressed length, then one LZ4 block. The decoder is
// our own so that every bound is checked here (the prefix against max_size and against what a block can expand
// to, every literal and match against the declared length), whatever the bytes. The encoder is chosen by size:
// lz4_block.ts's JavaScript below NATIVE_FROM bytes (no N-API crossing, written in place), lz4-napi's (lz4_flex,
// the Rust crate, as a prebuilt Node binding in an optional dependency; it writes exactly this form) from there,
// where it loads: on 64 KiB of text lz4-napi took 8-150 µs, more than a network round trip in JavaScript.

import { createRequire } from "node:module";
import { InvalidEntry } from "./errors.js";
import { lz4BlockBound, lz4BlockInto } from "./lz4_block.js";

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

/** Which encoder writes large LZ4 payloads here: "native" (lz4-napi) or "js"; LARDER_LZ4=js chooses JavaScript. */
export const lz4Encoder: "native" | "js" = nativeCompress ? "native" : "js";

/** Payloads from this size go to lz4-napi where it loads (below it the N-API call costs more than the work). */
export const NATIVE_FROM = 8 * 1024;

/** The most an LZ4 block can expand: 255 output bytes per input byte, plus 16. */
export const LZ4_MAX_RATIO = 255;

/**
 * `data` in larder's LZ4 form written into `dst` at `at` (the 4-byte size prefix, then the block) only if it takes
 * at most `room` bytes there: returns the bytes written, or -1 (then what is in `dst` from `at` is undefined).
 */
export function lz4CompressInto(data: Uint8Array, dst: Uint8Array, at: number, room: number): number {
  if (room < 5) return -1;
  const out = data.length >= NATIVE_FROM ? lz4CompressNative(data) : undefined;
  if (out !== undefined) {
    // Its form is larder's (a u32 LE length, then the block); a binding that wrote anything else is not used.
    if (out.length >= 4 && out.readUInt32LE(0) === data.length) {
      if (out.length > room) return -1;
      dst.set(out, at);
      return out.length;
    }
  }
  return lz4CompressJsInto(data, dst, at, room);
}

/** lz4CompressInto with the JavaScript encoder whatever the size. */
export function lz4CompressJsInto(data: Uint8Array, dst: Uint8Array, at: number, room: number): number {
  if (room < 5) return -1;
  const end = lz4BlockInto(data, dst, at + 4, at + room);
  if (end < 0) return -1;
  dst[at] = data.length & 0xff;
  dst[at + 1] = (data.length >>> 8) & 0xff;
  dst[at + 2] = (data.length >>> 16) & 0xff;
  dst[at + 3] = data.length >>> 24;
  return end - at;
}

/** `data` in larder's LZ4 form, by the encoder its size chooses. */
export function lz4Compress(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + lz4BlockBound(data.length));
  return out.slice(0, lz4CompressInto(data, out, 0, out.length));
}

/** `data` in larder's LZ4 form by the JavaScript encoder (what runs without lz4-napi, and below NATIVE_FROM). */
export function lz4CompressJs(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + lz4BlockBound(data.length));
  return out.slice(0, lz4CompressJsInto(data, out, 0, out.length));
}

/** `data` in larder's LZ4 form by lz4-napi, or undefined where it does not load. */
export function lz4CompressNative(data: Uint8Array): Buffer | undefined {
  return nativeCompress?.(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
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
    if (literals < 32) {
      // Short runs byte by byte: a subarray and a set per run cost more than the copy (issue 34: structured values
      // are mostly short literals and matches; 64 KiB of them took 377 µs with a call per run).
      for (let i = 0; i < literals; i++) out[op + i] = src[ip + i] as number;
    } else out.set(src.subarray(ip, ip + literals), op);
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
    if (length < 32) {
      // Byte by byte, in order: right whether or not the match overlaps its own output.
      for (let from = op - offset, i = 0; i < length; i++) out[op++] = out[from++] as number;
    } else if (offset >= length) {
      out.copyWithin(op, op - offset, op - offset + length);
      op += length;
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
