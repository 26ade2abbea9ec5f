// Raw Snappy (FORMAT.md §3: one block with its varint length preamble, never the framed format). Our own decoder
// checks the preamble against max_size before allocating and every copy against the output; snappyjs encodes.

import snappyjs from "snappyjs";
import { InvalidEntry } from "./errors.js";

const VARINT_MAX_BYTES = 10;
const PREAMBLE_MAX_BYTES = 5;

export function snappyCompress(data: Uint8Array): Uint8Array {
  return new Uint8Array(snappyjs.compress(data));
}

function corrupt(why: string): never {
  throw new InvalidEntry("corrupt_payload", `snappy: ${why}`);
}

/** The preamble's value (as a number: beyond 2^53 it is only ever compared with max_size) and its length. */
function preamble(data: Uint8Array): [number, number] {
  if (data.length === 0) corrupt("payload is empty");
  let value = 0;
  for (let i = 0; i < data.length; i++) {
    if (i === VARINT_MAX_BYTES) corrupt(`length preamble longer than ${VARINT_MAX_BYTES} bytes`);
    const b = data[i] as number;
    value += (b & 0x7f) * 2 ** (7 * i);
    if (b < 0x80) return [value, i + 1];
  }
  return corrupt("length preamble is cut short");
}

export function snappyDecompress(data: Uint8Array, maxSize: number): Uint8Array {
  const [declared, used] = preamble(data);
  if (declared > maxSize)
    throw new InvalidEntry("too_large", `payload of ${declared} bytes exceeds the ${maxSize}-byte limit`);
  if (used > PREAMBLE_MAX_BYTES) corrupt(`length preamble of ${used} bytes (a raw block's takes at most 5)`);
  const out = new Uint8Array(declared);
  const end = data.length;
  let ip = used;
  let op = 0;
  while (ip < end) {
    const tag = data[ip++] as number;
    const type = tag & 3;
    if (type === 0) {
      let length = tag >>> 2;
      if (length >= 60) {
        const n = length - 59;
        if (ip + n > end) corrupt("literal length cut short");
        length = 0;
        for (let i = 0; i < n; i++) length += (data[ip + i] as number) * 2 ** (8 * i);
        ip += n;
      }
      length += 1;
      if (ip + length > end) corrupt("literal past the end of the block");
      if (op + length > declared) corrupt("output longer than the preamble");
      out.set(data.subarray(ip, ip + length), op);
      ip += length;
      op += length;
      continue;
    }
    let length: number;
    let offset: number;
    if (type === 1) {
      if (ip + 1 > end) corrupt("copy cut short");
      length = ((tag >>> 2) & 7) + 4;
      offset = ((tag >>> 5) << 8) | (data[ip] as number);
      ip += 1;
    } else if (type === 2) {
      if (ip + 2 > end) corrupt("copy cut short");
      length = (tag >>> 2) + 1;
      offset = (data[ip] as number) | ((data[ip + 1] as number) << 8);
      ip += 2;
    } else {
      if (ip + 4 > end) corrupt("copy cut short");
      length = (tag >>> 2) + 1;
      offset =
        ((data[ip] as number) | ((data[ip + 1] as number) << 8) | ((data[ip + 2] as number) << 16)) +
        (data[ip + 3] as number) * 2 ** 24;
      ip += 4;
    }
    if (offset === 0 || offset > op) corrupt("copy offset outside the output");
    if (op + length > declared) corrupt("output longer than the preamble");
    let from = op - offset;
    if (offset >= length) {
      out.copyWithin(op, from, from + length);
      op += length;
    } else {
      for (let i = 0; i < length; i++) out[op++] = out[from++] as number;
    }
  }
  if (op !== declared) corrupt(`decoded to ${op} bytes, preamble declared ${declared}`);
  return out;
}
