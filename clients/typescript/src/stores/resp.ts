// RESP (Redis's protocol) for larder's Redis store: commands packed as arrays of bulk strings, and an incremental
// reply parser that bounds everything a hostile server could send (spec/STORES.md §2): lines of 8 KiB, bulk strings
// of `maxBulk` (refused when announced), `maxBytes` of bulk data and `maxElements` array elements per reply, and
// nesting at most 8 deep. Anything else is a WireFailure: the connection is out of step and is closed.

import { WireFailure } from "./wire.js";

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

export function pack(...parts: Array<string | number | bigint | Uint8Array>): Buffer {
  const chunks: Buffer[] = [Buffer.from(`*${parts.length}\r\n`)];
  for (const part of parts) {
    const bytes =
      part instanceof Uint8Array
        ? Buffer.from(part.buffer, part.byteOffset, part.length)
        : Buffer.from(String(part), "utf8");
    chunks.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from("\r\n"));
  }
  return Buffer.concat(chunks);
}

class NeedMore {
  constructor(readonly need: number) {}
}

/** One reply at `pos`: [value, next] or the bytes needed (from pos) before trying again. */
export function parseResp(buf: Buffer, pos: number, limits: Limits): [RespValue, number] | number {
  const budget = { bytes: limits.maxBytes, elements: limits.maxElements };
  try {
    return parseAt(buf, pos, pos, limits, budget, 0);
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

function integer(text: string): number {
  if (!/^-?[0-9]{1,18}$/.test(text))
    throw new WireFailure(`malformed reply: ${JSON.stringify(text.slice(0, 40))} is not a length`);
  return Number(text);
}

function parseAt(
  buf: Buffer,
  at: number,
  start: number,
  limits: Limits,
  budget: { bytes: number; elements: number },
  depth: number,
): [RespValue, number] {
  if (at >= buf.length) throw new NeedMore(at - start + 1);
  const type = buf[at] as number;
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
    case 0x24: {
      // $
      const n = integer(text);
      if (n === -1) return [null, next];
      if (n < 0) throw new WireFailure("malformed reply: a negative bulk length");
      if (n > limits.maxBulk)
        throw new WireFailure(`malformed reply: a value of ${n} bytes (max_value is ${limits.maxBulk})`);
      budget.bytes -= n;
      if (budget.bytes < 0) throw new WireFailure("malformed reply: more bulk data than the command can get");
      if (buf.length < next + n + 2) throw new NeedMore(next + n + 2 - start);
      if (buf[next + n] !== 13 || buf[next + n + 1] !== 10)
        throw new WireFailure("malformed reply: a bulk string without CRLF");
      return [new Uint8Array(buf.subarray(next, next + n)), next + n + 2];
    }
    case 0x2a: {
      // *
      const n = integer(text);
      if (n === -1) return [null, next];
      if (n < 0) throw new WireFailure("malformed reply: a negative array length");
      if (depth + 1 > MAX_DEPTH) throw new WireFailure(`malformed reply: arrays nested more than ${MAX_DEPTH} deep`);
      budget.elements -= n;
      if (budget.elements < 0) throw new WireFailure(`malformed reply: more than ${limits.maxElements} elements`);
      const items: RespValue[] = [];
      let pos = next;
      for (let i = 0; i < n; i++) {
        const [item, after] = parseAt(buf, pos, start, limits, budget, depth + 1);
        items.push(item);
        pos = after;
      }
      return [items, pos];
    }
    default:
      throw new WireFailure(`malformed reply: type byte 0x${type.toString(16)}`);
  }
}
