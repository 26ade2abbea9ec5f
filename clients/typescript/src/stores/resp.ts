// RESP (Redis's protocol) for larder's Redis store: commands packed as arrays of bulk strings, and an incremental
// reply parser that bounds everything a hostile server could send (spec/STORES.md §2): lines of 8 KiB, bulk strings
// of `maxBulk` (refused when announced), `maxBytes` of bulk data and `maxElements` array elements per reply, and
// nesting at most 8 deep. Anything else is a WireFailure: the connection is out of step and is closed.

import { copyOut, WireFailure } from "./wire.js";

const MAX_LINE = 8192;
const MAX_DEPTH = 8;

export interface Limits {
  maxBulk: number;
  maxBytes: number;
  maxElements: number;
}

/** An error answer (-ERR …): the server is fine, the command failed. */
export class ErrorReply {
  constructor(readonly message: string) {}
}

export type RespValue = null | Uint8Array | string | number | bigint | ErrorReply | RespValue[];

/** A command as a RESP array of bulk strings, in one Buffer (one allocation: a command per request is the hot path). */
export function pack(...parts: Array<string | number | bigint | Uint8Array>): Buffer {
  let size = 1 + decimalLength(parts.length) + 2;
  const texts: Array<string | Uint8Array> = new Array(parts.length);
  const lengths: number[] = new Array(parts.length);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as string | number | bigint | Uint8Array;
    const item = part instanceof Uint8Array ? part : String(part);
    const n = typeof item === "string" ? Buffer.byteLength(item, "utf8") : item.length;
    texts[i] = item;
    lengths[i] = n;
    size += 1 + decimalLength(n) + 2 + n + 2;
  }
  const out = Buffer.allocUnsafe(size);
  let at = out.write(`*${parts.length}\r\n`, 0, "latin1");
  for (let i = 0; i < texts.length; i++) {
    const item = texts[i] as string | Uint8Array;
    at += out.write(`$${lengths[i]}\r\n`, at, "latin1");
    if (typeof item === "string") at += out.write(item, at, "utf8");
    else {
      out.set(item, at);
      at += item.length;
    }
    out[at++] = 13;
    out[at++] = 10;
  }
  return out;
}

function decimalLength(n: number): number {
  return n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : String(n).length;
}

class NeedMore {
  constructor(readonly need: number) {}
}

/** One reply at `pos`: [value, next] or the bytes needed (from pos) before trying again. */
export function parseResp(buf: Buffer, pos: number, limits: Limits): [RespValue, number] | number {
  try {
    // An array (MGET's reply) often spans socket reads: its shape is checked first without copying any value, so
    // the attempts made before its last bytes arrive copy nothing.
    if (buf[pos] === 0x2a)
      parseAt(buf, pos, pos, limits, { bytes: limits.maxBytes, elements: limits.maxElements }, 0, false);
    return parseAt(buf, pos, pos, limits, { bytes: limits.maxBytes, elements: limits.maxElements }, 0, true);
  } catch (e) {
    if (e instanceof NeedMore) return e.need;
    throw e;
  }
}

function line(buf: Buffer, at: number, start: number): [string, number] {
  const end = buf.indexOf("\r\n", at, "latin1");
  if (end === -1) {
    if (buf.length - at > MAX_LINE) throw new WireFailure(`malformed reply: a line longer than ${MAX_LINE} bytes`);
    throw new NeedMore(buf.length - start + 1);
  }
  if (end - at > MAX_LINE) throw new WireFailure(`malformed reply: a line longer than ${MAX_LINE} bytes`);
  return [buf.toString("latin1", at, end), end + 2];
}

function parseAt(
  buf: Buffer,
  at: number,
  start: number,
  limits: Limits,
  budget: { bytes: number; elements: number },
  depth: number,
  build: boolean,
): [RespValue, number] {
  if (at >= buf.length) throw new NeedMore(at - start + 1);
  const type = buf[at] as number;
  if (type === 0x24 || type === 0x2a) return parseAggregate(buf, at, start, limits, budget, depth, type, build);
  const [text, next] = line(buf, at + 1, start);
  switch (type) {
    case 0x2b: // +
      return [text, next];
    case 0x2d: // -
      return [new ErrorReply(text), next];
    case 0x3a: {
      // :
      if (!/^-?[0-9]{1,19}$/.test(text))
        throw new WireFailure(`malformed reply: integer ${JSON.stringify(text.slice(0, 40))}`);
      const n = BigInt(text);
      return [n >= -9007199254740991n && n <= 9007199254740991n ? Number(n) : n, next];
    }
    default:
      throw new WireFailure(`malformed reply: type byte 0x${type.toString(16)}`);
  }
}

/** The length line of a bulk string ($) or array (*) read from the bytes (no string made: the common replies). */
function lengthLine(buf: Buffer, at: number, start: number): [number, number] {
  let i = at;
  const end = Math.min(buf.length, at + MAX_LINE);
  let negative = false;
  if (i < end && buf[i] === 0x2d) {
    negative = true;
    i++;
  }
  let n = 0;
  let digits = 0;
  while (i < end) {
    const c = buf[i] as number;
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
    digits++;
    i++;
  }
  if (i >= buf.length - 1) {
    // the line (or its LF) is not all here: wait, unless it is already longer than a line may be
    if (buf.length - at > MAX_LINE) throw new WireFailure(`malformed reply: a line longer than ${MAX_LINE} bytes`);
    throw new NeedMore(buf.length - start + 1);
  }
  if (digits === 0 || digits > 18 || buf[i] !== 13 || buf[i + 1] !== 10) {
    const [text] = line(buf, at, start);
    throw new WireFailure(`malformed reply: ${JSON.stringify(text.slice(0, 40))} is not a length`);
  }
  return [negative ? -n : n, i + 2];
}

function parseAggregate(
  buf: Buffer,
  at: number,
  start: number,
  limits: Limits,
  budget: { bytes: number; elements: number },
  depth: number,
  type: number,
  build: boolean,
): [RespValue, number] {
  const [n, next] = lengthLine(buf, at + 1, start);
  switch (type) {
    case 0x24: {
      // $
      if (n === -1) return [null, next];
      if (n < 0) throw new WireFailure("malformed reply: a negative bulk length");
      if (n > limits.maxBulk)
        throw new WireFailure(`malformed reply: a value of ${n} bytes (max_value is ${limits.maxBulk})`);
      budget.bytes -= n;
      if (budget.bytes < 0) throw new WireFailure("malformed reply: more bulk data than the command can get");
      if (buf.length < next + n + 2) throw new NeedMore(next + n + 2 - start);
      if (buf[next + n] !== 13 || buf[next + n + 1] !== 10)
        throw new WireFailure("malformed reply: a bulk string without CRLF");
      return [build ? copyOut(buf, next, next + n) : null, next + n + 2];
    }
    case 0x2a: {
      // *
      if (n === -1) return [null, next];
      if (n < 0) throw new WireFailure("malformed reply: a negative array length");
      if (depth + 1 > MAX_DEPTH) throw new WireFailure(`malformed reply: arrays nested more than ${MAX_DEPTH} deep`);
      budget.elements -= n;
      if (budget.elements < 0) throw new WireFailure(`malformed reply: more than ${limits.maxElements} elements`);
      const items: RespValue[] = [];
      let pos = next;
      for (let i = 0; i < n; i++) {
        const [item, after] = parseAt(buf, pos, start, limits, budget, depth + 1, build);
        if (build) items.push(item);
        pos = after;
      }
      return [build ? items : null, pos];
    }
    default:
      throw new WireFailure(`malformed reply: type byte 0x${type.toString(16)}`);
  }
}
