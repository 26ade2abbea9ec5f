// The MessagePack encoder and decoder as they were before issue 34's rewrite (src/msgpack_write.ts, the decoder's
// short-string and key paths), kept unchanged as the oracle msgpack_equivalence.test.ts holds the fast ones to:
// same bytes for every value, same values (or the same refusal) for every input.
//
// Original header: MessagePack for larder: a canonical encoder (FORMAT.md §2: smallest integers, float64 only, str for text, bin
// for bytes, maps in their given order), because no npm encoder is byte-identical to the other languages for
// every value; and a decoder of untrusted bytes that bounds everything (nesting, claimed lengths, trailing bytes)
// and fails with one error type, never a RangeError or stack overflow.

import {
  Ext,
  Float,
  INT64_MIN,
  isPlainObject,
  MAX_NESTING,
  Pairs,
  setOwn,
  UINT64_MAX,
  type Value,
} from "../../src/value.js";

/** A value that cannot be written as MessagePack (its message says why). */
export class EncodeError extends Error {
  override readonly name = "EncodeError";
}

/** Bytes that are not one valid MessagePack object within the decoder's bounds. */
export class MsgpackError extends Error {
  override readonly name = "MsgpackError";
}

const textEncoder = new TextEncoder();

class Writer {
  buf = new Uint8Array(256);
  view = new DataView(this.buf.buffer);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }
  u16(v: number): void {
    this.ensure(2);
    this.view.setUint16(this.pos, v);
    this.pos += 2;
  }
  u32(v: number): void {
    this.ensure(4);
    this.view.setUint32(this.pos, v);
    this.pos += 4;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
}

/** `value` as canonical MessagePack. Numbers that are integers within ±2^53 are written as integers, other
 * numbers as float64; use `Float` for an integral float and bigint for larger integers. */
export function encodeMsgpack(value: Value): Uint8Array {
  const w = new Writer();
  write(w, value, 0);
  return w.buf.slice(0, w.pos);
}

function write(w: Writer, value: Value, level: number): void {
  if (value === null || value === undefined) {
    w.u8(0xc0);
    return;
  }
  switch (typeof value) {
    case "boolean": {
      w.u8(value ? 0xc3 : 0xc2);
      return;
    }
    case "number":
      if (Number.isSafeInteger(value) && !Object.is(value, -0)) {
        writeInt(w, BigInt(value), value);
        return;
      }
      {
        writeFloat(w, value);
        return;
      }
    case "bigint": {
      writeInt(w, value, undefined);
      return;
    }
    case "string": {
      writeStr(w, value);
      return;
    }
    default:
      break;
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
  if (Array.isArray(value)) {
    writeLength(w, value.length, 0x90, 0xdc, 0xdd, 15);
    for (const item of value) write(w, item, level + 1);
    return;
  }
  if (value instanceof Map) {
    writeLength(w, value.size, 0x80, 0xde, 0xdf, 15);
    for (const [k, v] of value) {
      write(w, k, level + 1);
      write(w, v, level + 1);
    }
    return;
  }
  if (value instanceof Pairs) {
    writeLength(w, value.entries.length, 0x80, 0xde, 0xdf, 15);
    for (const [k, v] of value.entries) {
      write(w, k, level + 1);
      write(w, v, level + 1);
    }
    return;
  }
  if (isPlainObject(value)) {
    const keys = Object.keys(value);
    writeLength(w, keys.length, 0x80, 0xde, 0xdf, 15);
    for (const k of keys) {
      writeStr(w, k);
      write(w, value[k] as Value, level + 1);
    }
    return;
  }
  throw new EncodeError(`cannot encode a ${Object.prototype.toString.call(value)} as MessagePack`);
}

function writeLength(w: Writer, n: number, fix: number, m16: number, m32: number, fixMax: number): void {
  if (n <= fixMax) w.u8(fix | n);
  else if (n <= 0xffff) {
    w.u8(m16);
    w.u16(n);
  } else {
    w.u8(m32);
    w.u32(n);
  }
}

function writeInt(w: Writer, big: bigint, small: number | undefined): void {
  if (big >= 0n) {
    if (big > UINT64_MAX) throw new EncodeError(`integer ${big} outside the MessagePack range [-2^63, 2^64-1]`);
    const n = small ?? (big <= 0xffffffffn ? Number(big) : undefined);
    if (n !== undefined && n < 0x80) {
      w.u8(n);
      return;
    }
    if (n !== undefined && n <= 0xff) {
      w.u8(0xcc);
      w.u8(n);
      return;
    }
    if (n !== undefined && n <= 0xffff) {
      w.u8(0xcd);
      w.u16(n);
      return;
    }
    if (n !== undefined && n <= 0xffffffff) {
      w.u8(0xce);
      w.u32(n);
      return;
    }
    w.u8(0xcf);
    w.ensure(8);
    w.view.setBigUint64(w.pos, big);
    w.pos += 8;
    return;
  }
  if (big < INT64_MIN) throw new EncodeError(`integer ${big} outside the MessagePack range [-2^63, 2^64-1]`);
  const n = small ?? (big >= -0x80000000n ? Number(big) : undefined);
  if (n !== undefined && n >= -32) {
    w.u8(n & 0xff);
    return;
  }
  if (n !== undefined && n >= -0x80) {
    w.u8(0xd0);
    w.u8(n & 0xff);
    return;
  }
  if (n !== undefined && n >= -0x8000) {
    w.u8(0xd1);
    w.u16(n & 0xffff);
    return;
  }
  if (n !== undefined && n >= -0x80000000) {
    w.u8(0xd2);
    w.u32(n >>> 0);
    return;
  }
  w.u8(0xd3);
  w.ensure(8);
  w.view.setBigInt64(w.pos, big);
  w.pos += 8;
}

function writeFloat(w: Writer, n: number): void {
  w.u8(0xcb);
  w.ensure(8);
  w.view.setFloat64(w.pos, n);
  w.pos += 8;
}

function writeStr(w: Writer, s: string): void {
  if (!s.isWellFormed()) throw new EncodeError("a string with a lone surrogate has no UTF-8 form");
  const b = textEncoder.encode(s);
  const n = b.length;
  if (n < 32) w.u8(0xa0 | n);
  else if (n <= 0xff) {
    w.u8(0xd9);
    w.u8(n);
  } else if (n <= 0xffff) {
    w.u8(0xda);
    w.u16(n);
  } else {
    w.u8(0xdb);
    w.u32(n);
  }
  w.bytes(b);
}

function writeBin(w: Writer, b: Uint8Array): void {
  const n = b.length;
  if (n <= 0xff) {
    w.u8(0xc4);
    w.u8(n);
  } else if (n <= 0xffff) {
    w.u8(0xc5);
    w.u16(n);
  } else {
    w.u8(0xc6);
    w.u32(n);
  }
  w.bytes(b);
}

function writeExt(w: Writer, e: Ext): void {
  if (!Number.isInteger(e.type) || e.type < -128 || e.type > 127) throw new EncodeError(`ext type ${e.type}`);
  const n = e.data.length;
  const fixed: Record<number, number> = { 1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8 };
  const marker = fixed[n];
  if (marker !== undefined) w.u8(marker);
  else if (n <= 0xff) {
    w.u8(0xc7);
    w.u8(n);
  } else if (n <= 0xffff) {
    w.u8(0xc8);
    w.u16(n);
  } else {
    w.u8(0xc9);
    w.u32(n);
  }
  w.u8(e.type & 0xff);
  w.bytes(e.data);
}

/** How decoded values are shaped. "plain": floats as numbers, string-keyed maps as objects (others as Map).
 * "faithful": floats as `Float`, every map as `Pairs` (order and duplicates kept), for display and vectors. */
export type DecodeMode = "plain" | "faithful";

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Exactly one MessagePack object from `data`; throws MsgpackError on anything else (trailing bytes, a claim
 * longer than the input, nesting deeper than MAX_NESTING, invalid UTF-8 in a str, the reserved marker 0xc1). */
export function decodeMsgpack(data: Uint8Array, mode: DecodeMode = "plain"): Value {
  const r = new Reader(data, mode === "faithful");
  const value = r.read(0);
  if (r.pos !== data.length) throw new MsgpackError(`${data.length - r.pos} trailing bytes after the value`);
  return value;
}

class Reader {
  pos = 0;
  readonly view: DataView;
  constructor(
    readonly data: Uint8Array,
    readonly faithful: boolean,
  ) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  need(n: number): void {
    if (this.pos + n > this.data.length) throw new MsgpackError("truncated value");
  }
  u8(): number {
    this.need(1);
    return this.data[this.pos++] as number;
  }
  u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  take(n: number): Uint8Array {
    this.need(n);
    const out = this.data.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  str(n: number): string {
    this.need(n);
    try {
      const s = utf8Strict.decode(this.data.subarray(this.pos, this.pos + n));
      this.pos += n;
      return s;
    } catch {
      throw new MsgpackError("str is not valid UTF-8");
    }
  }
  float(v: number): Value {
    return this.faithful ? new Float(v) : v;
  }
  int64(signed: boolean): number | bigint {
    this.need(8);
    const v = signed ? this.view.getBigInt64(this.pos) : this.view.getBigUint64(this.pos);
    this.pos += 8;
    return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v;
  }

  read(level: number): Value {
    const b = this.u8();
    if (b < 0x80) return b;
    if (b >= 0xe0) return b - 0x100;
    if (b < 0x90) return this.map(b & 0x0f, level);
    if (b < 0xa0) return this.array(b & 0x0f, level);
    if (b < 0xc0) return this.str(b & 0x1f);
    switch (b) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xc4:
        return this.take(this.u8());
      case 0xc5:
        return this.take(this.u16());
      case 0xc6:
        return this.take(this.u32());
      case 0xc7:
        return this.ext(this.u8());
      case 0xc8:
        return this.ext(this.u16());
      case 0xc9:
        return this.ext(this.u32());
      case 0xca: {
        this.need(4);
        const v = this.view.getFloat32(this.pos);
        this.pos += 4;
        return this.float(v);
      }
      case 0xcb: {
        this.need(8);
        const v = this.view.getFloat64(this.pos);
        this.pos += 8;
        return this.float(v);
      }
      case 0xcc:
        return this.u8();
      case 0xcd:
        return this.u16();
      case 0xce:
        return this.u32();
      case 0xcf:
        return this.int64(false);
      case 0xd0:
        return (this.u8() << 24) >> 24;
      case 0xd1:
        return (this.u16() << 16) >> 16;
      case 0xd2:
        return this.u32() | 0;
      case 0xd3:
        return this.int64(true);
      case 0xd4:
        return this.ext(1);
      case 0xd5:
        return this.ext(2);
      case 0xd6:
        return this.ext(4);
      case 0xd7:
        return this.ext(8);
      case 0xd8:
        return this.ext(16);
      case 0xd9:
        return this.str(this.u8());
      case 0xda:
        return this.str(this.u16());
      case 0xdb:
        return this.str(this.u32());
      case 0xdc:
        return this.array(this.u16(), level);
      case 0xdd:
        return this.array(this.u32(), level);
      case 0xde:
        return this.map(this.u16(), level);
      case 0xdf:
        return this.map(this.u32(), level);
      default:
        throw new MsgpackError(`reserved marker 0x${b.toString(16)}`);
    }
  }

  ext(n: number): Ext {
    const type = (this.u8() << 24) >> 24;
    return new Ext(type, this.take(n));
  }

  array(n: number, level: number): Value[] {
    if (level >= MAX_NESTING) throw new MsgpackError(`value nested more than ${MAX_NESTING} levels deep`);
    // Each element takes at least one byte: a claim beyond the input is refused before anything is allocated.
    if (n > this.data.length - this.pos) throw new MsgpackError(`array of ${n} elements claimed past the input`);
    const out: Value[] = new Array(n);
    for (let i = 0; i < n; i++) out[i] = this.read(level + 1);
    return out;
  }

  map(n: number, level: number): Value {
    if (level >= MAX_NESTING) throw new MsgpackError(`value nested more than ${MAX_NESTING} levels deep`);
    if (n * 2 > this.data.length - this.pos) throw new MsgpackError(`map of ${n} pairs claimed past the input`);
    if (this.faithful) {
      const entries: Array<[Value, Value]> = [];
      for (let i = 0; i < n; i++) {
        const k = this.read(level + 1);
        entries.push([k, this.read(level + 1)]);
      }
      return new Pairs(entries);
    }
    const object: { [key: string]: Value } = {};
    let map: Map<Value, Value> | undefined;
    for (let i = 0; i < n; i++) {
      const k = this.read(level + 1);
      const v = this.read(level + 1);
      if (map === undefined && typeof k === "string") {
        setOwn(object, k, v);
        continue;
      }
      if (map === undefined) map = new Map(Object.entries(object));
      map.set(k, v);
    }
    return map ?? object;
  }
}
