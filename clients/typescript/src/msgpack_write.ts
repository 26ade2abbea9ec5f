// larder's canonical MessagePack encoder (FORMAT.md §2: smallest integers, float64 only, str for text, bin for
// bytes, maps in their given order), because no npm encoder is byte-identical to the other languages for every
// value. One pass over the value straight into one reused buffer (issue 34: a query result of 800 records took
// 6.5 ms here when every integer went through a BigInt, every string through its own TextEncoder array and every
// byte through a bounds check; JSON.stringify took 0.6 ms): integers are written from the number, ASCII strings
// byte by byte in place, longer or non-ASCII strings by Buffer's native UTF-8 writer.

import { Ext, Float, INT64_MIN, MAX_NESTING, Pairs, UINT64_MAX, type Value } from "./value.js";

/** A value that cannot be written as MessagePack (its message says why). */
export class EncodeError extends Error {
  override readonly name = "EncodeError";
}

/** Strings up to this many UTF-16 units are tried byte by byte as ASCII before Buffer's writer (a native call
 * costs more than copying a short string here). */
const ASCII_LOOP_MAX = 48;
/** The reused buffer is dropped for a fresh one after a value longer than this. */
const KEEP_MAX = 1 << 20;
const TWO_32 = 2 ** 32;

class Writer {
  buf: Buffer;
  view: DataView;
  pos = 0;
  constructor(size: number) {
    this.buf = Buffer.allocUnsafeSlow(size);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }
  /** Room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafeSlow(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.byteLength);
  }
}

/** The writer encodes reuse; a value whose getters encode another value meanwhile gets a writer of its own. */
let shared: Writer | undefined = new Writer(64 * 1024);

/** `value` as canonical MessagePack. Numbers that are integers within ±2^53 are written as integers, other
 * numbers as float64; use `Float` for an integral float and bigint for larger integers. */
export function encodeMsgpack(value: Value): Uint8Array {
  return withEncoded(value, (bytes) => bytes.slice());
}

/** `use` called with `value`'s MessagePack in a buffer that is reused once `use` returns (it must copy what it
 * keeps): the entry encoder compresses or copies it into the entry, with no array of its own in between. */
export function withEncoded<T>(value: Value, use: (bytes: Uint8Array) => T): T {
  const w = shared ?? new Writer(256);
  shared = undefined;
  w.pos = 0;
  try {
    write(w, value, 0);
    return use(new Uint8Array(w.buf.buffer, w.buf.byteOffset, w.pos));
  } finally {
    if (w.buf.length <= KEEP_MAX) shared = w;
    else if (shared === undefined) shared = new Writer(64 * 1024);
  }
}

function write(w: Writer, value: Value, level: number): void {
  switch (typeof value) {
    case "string":
      writeStr(w, value);
      return;
    case "number":
      writeNumber(w, value);
      return;
    case "boolean":
      w.ensure(1);
      w.buf[w.pos++] = value ? 0xc3 : 0xc2;
      return;
    case "bigint":
      writeBigInt(w, value);
      return;
    case "undefined":
      w.ensure(1);
      w.buf[w.pos++] = 0xc0;
      return;
    case "object":
      break;
    default:
      refuse(value, level);
  }
  if (value === null) {
    w.ensure(1);
    w.buf[w.pos++] = 0xc0;
    return;
  }
  // Containers first (a query result is mostly records): an array, then a plain object by its prototype, which no
  // Float, byte array, Ext, Map or Pairs has.
  if (Array.isArray(value)) {
    if (level >= MAX_NESTING) throw new EncodeError(`value nested more than ${MAX_NESTING} levels deep`);
    const n = value.length;
    writeLength(w, n, 0x90, 0xdc, 0xdd);
    for (let i = 0; i < n; i++) write(w, value[i] as Value, level + 1);
    return;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    if (level >= MAX_NESTING) throw new EncodeError(`value nested more than ${MAX_NESTING} levels deep`);
    writeObject(w, value as { [key: string]: Value }, level, proto !== null && prototypeEnumerable());
    return;
  }
  if (value instanceof Float) {
    writeFloat(w, value.value);
    return;
  }
  if (value instanceof Uint8Array) {
    writeBin(w, value);
    return;
  }
  if (value instanceof Ext) {
    writeExt(w, value);
    return;
  }
  if (level >= MAX_NESTING) throw new EncodeError(`value nested more than ${MAX_NESTING} levels deep`);
  if (value instanceof Map) {
    writeLength(w, value.size, 0x80, 0xde, 0xdf);
    for (const [k, v] of value) {
      write(w, k, level + 1);
      write(w, v, level + 1);
    }
    return;
  }
  if (value instanceof Pairs) {
    writeLength(w, value.entries.length, 0x80, 0xde, 0xdf);
    for (const [k, v] of value.entries) {
      write(w, k, level + 1);
      write(w, v, level + 1);
    }
    return;
  }
  refuse(value, level);
}

/** A value of no MessagePack form: too deep if it is past the nesting limit, else of a type that has none. */
function refuse(value: unknown, level: number): never {
  if (level >= MAX_NESTING) throw new EncodeError(`value nested more than ${MAX_NESTING} levels deep`);
  throw new EncodeError(`cannot encode a ${Object.prototype.toString.call(value)} as MessagePack`);
}

/** Whether Object.prototype has enumerable properties (someone added one): then for-in would list them too. */
function prototypeEnumerable(): boolean {
  for (const _ in EMPTY) return true;
  return false;
}
const EMPTY = {};

/** A plain object's own enumerable string keys and values, in Object.keys order. By for-in where nothing enumerable
 * is inherited (V8 walks its enum cache without an array of keys: a quarter of Object.keys's cost over records),
 * with a one-byte fixmap head reserved and widened afterwards in the rare object of more than 15 keys. */
function writeObject(w: Writer, object: { [key: string]: Value }, level: number, inherits: boolean): void {
  if (inherits) {
    const keys = Object.keys(object);
    writeLength(w, keys.length, 0x80, 0xde, 0xdf);
    for (const k of keys) {
      writeStr(w, k);
      write(w, object[k] as Value, level + 1);
    }
    return;
  }
  w.ensure(1);
  const head = w.pos++;
  let n = 0;
  for (const k in object) {
    writeStr(w, k);
    write(w, object[k] as Value, level + 1);
    n++;
  }
  if (n <= 15) {
    w.buf[head] = 0x80 | n;
    return;
  }
  const extra = n <= 0xffff ? 2 : 4;
  w.ensure(extra);
  w.buf.copyWithin(head + 1 + extra, head + 1, w.pos);
  w.pos += extra;
  const end = w.pos;
  w.pos = head;
  writeLength(w, n, 0x80, 0xde, 0xdf);
  w.pos = end;
}

function writeLength(w: Writer, n: number, fix: number, m16: number, m32: number): void {
  w.ensure(5);
  const b = w.buf;
  if (n <= 15) b[w.pos++] = fix | n;
  else if (n <= 0xffff) {
    b[w.pos] = m16;
    b[w.pos + 1] = n >>> 8;
    b[w.pos + 2] = n & 0xff;
    w.pos += 3;
  } else {
    b[w.pos] = m32;
    w.view.setUint32(w.pos + 1, n);
    w.pos += 5;
  }
}

/** A number: a safe integer (not -0) in the smallest integer form, anything else as float64. */
function writeNumber(w: Writer, n: number): void {
  if (!Number.isSafeInteger(n) || (n === 0 && 1 / n < 0)) {
    writeFloat(w, n);
    return;
  }
  w.ensure(9);
  const b = w.buf;
  const p = w.pos;
  if (n >= 0) {
    if (n < 0x80) {
      b[p] = n;
      w.pos = p + 1;
    } else if (n <= 0xff) {
      b[p] = 0xcc;
      b[p + 1] = n;
      w.pos = p + 2;
    } else if (n <= 0xffff) {
      b[p] = 0xcd;
      b[p + 1] = n >>> 8;
      b[p + 2] = n & 0xff;
      w.pos = p + 3;
    } else if (n <= 0xffffffff) {
      b[p] = 0xce;
      w.view.setUint32(p + 1, n);
      w.pos = p + 5;
    } else {
      b[p] = 0xcf;
      w.view.setUint32(p + 1, Math.floor(n / TWO_32));
      w.view.setUint32(p + 5, n >>> 0);
      w.pos = p + 9;
    }
    return;
  }
  if (n >= -32) {
    b[p] = n & 0xff;
    w.pos = p + 1;
  } else if (n >= -0x80) {
    b[p] = 0xd0;
    b[p + 1] = n & 0xff;
    w.pos = p + 2;
  } else if (n >= -0x8000) {
    b[p] = 0xd1;
    w.view.setInt16(p + 1, n);
    w.pos = p + 3;
  } else if (n >= -0x80000000) {
    b[p] = 0xd2;
    w.view.setInt32(p + 1, n);
    w.pos = p + 5;
  } else {
    b[p] = 0xd3;
    const high = Math.floor(n / TWO_32);
    w.view.setInt32(p + 1, high);
    w.view.setUint32(p + 5, n - high * TWO_32);
    w.pos = p + 9;
  }
}

function writeBigInt(w: Writer, big: bigint): void {
  if (big > UINT64_MAX || big < INT64_MIN)
    throw new EncodeError(`integer ${big} outside the MessagePack range [-2^63, 2^64-1]`);
  if (big >= -0x80000000n && big <= 0xffffffffn) {
    writeNumber(w, Number(big));
    return;
  }
  w.ensure(9);
  w.buf[w.pos] = big >= 0n ? 0xcf : 0xd3;
  if (big >= 0n) w.view.setBigUint64(w.pos + 1, big);
  else w.view.setBigInt64(w.pos + 1, big);
  w.pos += 9;
}

function writeFloat(w: Writer, n: number): void {
  w.ensure(9);
  w.buf[w.pos] = 0xcb;
  w.view.setFloat64(w.pos + 1, n);
  w.pos += 9;
}

/** The str head for `n` UTF-8 bytes at `p` (1, 2, 3 or 5 bytes, as `headSize` says). */
function strHead(w: Writer, p: number, n: number, headSize: number): void {
  const b = w.buf;
  if (headSize === 1) b[p] = 0xa0 | n;
  else if (headSize === 2) {
    b[p] = 0xd9;
    b[p + 1] = n;
  } else if (headSize === 3) {
    b[p] = 0xda;
    b[p + 1] = n >>> 8;
    b[p + 2] = n & 0xff;
  } else {
    b[p] = 0xdb;
    w.view.setUint32(p + 1, n);
  }
}

const strHeadSize = (n: number): number => (n < 32 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5);

function writeStr(w: Writer, s: string): void {
  const length = s.length;
  if (length <= ASCII_LOOP_MAX) {
    // ASCII in place: its byte count is its length, so the head is known before the bytes.
    const head = length < 32 ? 1 : 2;
    w.ensure(head + length);
    const b = w.buf;
    const start = w.pos + head;
    let i = 0;
    for (; i < length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      b[start + i] = c;
    }
    if (i === length) {
      strHead(w, w.pos, length, head);
      w.pos = start + length;
      return;
    }
  }
  if (!s.isWellFormed()) throw new EncodeError("a string with a lone surrogate has no UTF-8 form");
  const n = Buffer.byteLength(s, "utf8");
  const head = strHeadSize(n);
  w.ensure(head + n);
  strHead(w, w.pos, n, head);
  w.buf.write(s, w.pos + head, n, "utf8");
  w.pos += head + n;
}

function writeBin(w: Writer, bytes: Uint8Array): void {
  const n = bytes.length;
  w.ensure(5 + n);
  const b = w.buf;
  if (n <= 0xff) {
    b[w.pos++] = 0xc4;
    b[w.pos++] = n;
  } else if (n <= 0xffff) {
    b[w.pos++] = 0xc5;
    b[w.pos++] = n >>> 8;
    b[w.pos++] = n & 0xff;
  } else {
    b[w.pos] = 0xc6;
    w.view.setUint32(w.pos + 1, n);
    w.pos += 5;
  }
  b.set(bytes, w.pos);
  w.pos += n;
}

const EXT_FIXED: Record<number, number> = { 1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8 };

function writeExt(w: Writer, e: Ext): void {
  if (!Number.isInteger(e.type) || e.type < -128 || e.type > 127) throw new EncodeError(`ext type ${e.type}`);
  const n = e.data.length;
  w.ensure(6 + n);
  const b = w.buf;
  const marker = EXT_FIXED[n];
  if (marker !== undefined) b[w.pos++] = marker;
  else if (n <= 0xff) {
    b[w.pos++] = 0xc7;
    b[w.pos++] = n;
  } else if (n <= 0xffff) {
    b[w.pos++] = 0xc8;
    b[w.pos++] = n >>> 8;
    b[w.pos++] = n & 0xff;
  } else {
    b[w.pos] = 0xc9;
    w.view.setUint32(w.pos + 1, n);
    w.pos += 5;
  }
  b[w.pos++] = e.type & 0xff;
  b.set(e.data, w.pos);
  w.pos += n;
}
