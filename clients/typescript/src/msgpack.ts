// MessagePack for larder: the canonical encoder (msgpack_write.ts, re-exported here), and a decoder of untrusted
// bytes that bounds everything (nesting, claimed lengths, trailing bytes) and fails with one error type, never a
// RangeError or stack overflow.

import { Ext, Float, MAX_NESTING, Pairs, setOwn, type Value } from "./value.js";

export { EncodeError, encodeMsgpack, withEncoded } from "./msgpack_write.js";

/** Bytes that are not one valid MessagePack object within the decoder's bounds. */
export class MsgpackError extends Error {
  override readonly name = "MsgpackError";
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

/** Strings shorter than this are decoded by hand when ASCII; up to LATIN1_MAX bytes, ASCII is read by Buffer's
 * latin1 reader; longer or non-ASCII strings go to TextDecoder (which also refuses invalid UTF-8). */
const SHORT_STR = 16;
const LATIN1_MAX = 512;
/** The cache of decoded map keys: KEY_SLOTS slots of keys shorter than KEY_MAX bytes, by a hash of their bytes. */
const KEY_SLOTS = 1024;
const KEY_MAX = 24;
const keyStrings: Array<string | undefined> = new Array(KEY_SLOTS).fill(undefined);
const keyLengths = new Uint8Array(KEY_SLOTS);
const keyBytes = new Uint8Array(KEY_SLOTS * KEY_MAX);

/** `s` as V8's one copy of that text (the string a property key becomes): objects built with it as a key then skip
 * a look-up of the string table per property. */
function internalized(s: string): string {
  return Object.keys({ [s]: 0 })[0] ?? s;
}

class Reader {
  pos = 0;
  private buf: Buffer | undefined;
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
    const d = this.data;
    const start = this.pos;
    if (n < SHORT_STR) {
      // Short ASCII by hand: a TextDecoder call costs more than the loop (field names, short values).
      let s = "";
      let i = 0;
      for (; i < n; i++) {
        const c = d[start + i] as number;
        if (c >= 0x80) break;
        s += String.fromCharCode(c);
      }
      if (i === n) {
        this.pos = start + n;
        return s;
      }
    } else if (n <= LATIN1_MAX) {
      let i = 0;
      while (i < n && (d[start + i] as number) < 0x80) i++;
      if (i === n) {
        this.pos = start + n;
        return this.buffer().toString("latin1", start, start + n); // ASCII: its latin1 reading is its UTF-8
      }
    }
    try {
      const s = utf8Strict.decode(d.subarray(start, start + n));
      this.pos = start + n;
      return s;
    } catch {
      throw new MsgpackError("str is not valid UTF-8");
    }
  }
  /** A map key that is a short str: the string decoded before for the same bytes (keys repeat in every record of
   * a query result), else decoded and remembered. */
  key(level: number): Value {
    const b = this.data[this.pos];
    if (b === undefined || b < 0xa0 || b >= 0xa0 + KEY_MAX) return this.read(level);
    const n = b & 0x1f;
    const start = this.pos + 1;
    if (start + n > this.data.length) return this.read(level);
    const d = this.data;
    let h = n;
    for (let i = 0; i < n; i++) h = (Math.imul(h, 31) + (d[start + i] as number)) | 0;
    const slot = (h >>> 0) & (KEY_SLOTS - 1);
    const known = keyStrings[slot];
    if (known !== undefined && keyLengths[slot] === n) {
      const at = slot * KEY_MAX;
      let i = 0;
      while (i < n && keyBytes[at + i] === d[start + i]) i++;
      if (i === n) {
        this.pos = start + n;
        return known;
      }
    }
    this.pos = start;
    const s = internalized(this.str(n));
    keyStrings[slot] = s;
    keyLengths[slot] = n;
    keyBytes.set(d.subarray(start, start + n), slot * KEY_MAX);
    return s;
  }
  private buffer(): Buffer {
    this.buf ??= Buffer.from(this.data.buffer, this.data.byteOffset, this.data.byteLength);
    return this.buf;
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
        const k = this.key(level + 1);
        entries.push([k, this.read(level + 1)]);
      }
      return new Pairs(entries);
    }
    const object: { [key: string]: Value } = {};
    let map: Map<Value, Value> | undefined;
    for (let i = 0; i < n; i++) {
      const k = this.key(level + 1);
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
