// The entry header of FORMAT.md §1: 23 fixed bytes, then the optional stale window, version and tags. Reading it
// needs no payload work, so stores and the front can read expiry and tags cheaply. Times are u64 ms: a number
// when it fits in 2^53, else a bigint, so nothing is rounded.

import { utf8, utf8OrUndefined } from "./bytes.js";
import { COMPRESSORS, type Compressor } from "./compressors.js";
import { InvalidEntry } from "./errors.js";

export const MAGIC = [0xc1, 0x4c] as const;
export const FORMAT_VERSION = 1;
export const FIXED_HEADER = 23;
export const COMPRESSOR_OFFSET = 5;
export const KINDS = ["value", "response"] as const;
export const SERIALIZERS = ["raw", "msgpack", "json", "text"] as const;
export type Kind = (typeof KINDS)[number];
export type Serializer = (typeof SERIALIZERS)[number];
/** Milliseconds since the epoch (or a duration), u64: a number up to 2^53 − 1, a bigint beyond. */
export type Millis = number | bigint;

const FLAG_STALE = 0x01;
const FLAG_VERSION = 0x02;
const FLAG_TAGS = 0x04;
const U64_MAX = 2n ** 64n - 1n;

export interface Header {
  kind: Kind;
  serializer: Serializer;
  compressor: Compressor;
  createdAt: Millis;
  /** 0 = never expires. */
  expiresAt: Millis;
  staleMs: Millis;
  /** undefined = no version (the empty string is a version). */
  version: string | undefined;
  tags: string[];
  /** The header's length in bytes: the payload starts here. */
  size: number;
}

/** The moment past which an entry may not be served even stale (ms), or undefined for never. */
export function hardExpiry(expiresAt: Millis, staleMs: Millis): number | undefined {
  if (Number(expiresAt) === 0) return undefined;
  return Number(expiresAt) + Number(staleMs);
}

/** The u64 (little-endian) at `pos` of `data` (which holds 8 bytes there): a number when below 2^53 (read as two
 * u32 halves, byte by byte: no DataView or BigInt made on every read), else a bigint. */
function u64At(data: Uint8Array, pos: number): Millis {
  const low = u32At(data, pos);
  const high = u32At(data, pos + 4);
  if (high < 0x200000) return high * 0x100000000 + low;
  return (BigInt(high) << 32n) | BigInt(low);
}

function u32At(data: Uint8Array, pos: number): number {
  return (
    ((data[pos] as number) | ((data[pos + 1] as number) << 8) | ((data[pos + 2] as number) << 16)) +
    (data[pos + 3] as number) * 0x1000000
  );
}

function truncated(what: string, need: number, have: number): InvalidEntry {
  return new InvalidEntry("truncated", `${what} needs ${need} bytes, the entry has ${have}`);
}

/** expires_at of an entry (fixed offset 15), or undefined when the bytes are not an entry's header. */
export function peekExpiresAt(data: Uint8Array): Millis | undefined {
  if (data.length < FIXED_HEADER || data[0] !== MAGIC[0] || data[1] !== MAGIC[1] || data[2] !== FORMAT_VERSION)
    return undefined;
  return u64At(data, 15);
}

/** expires_at of an entry whose header is the 23 fixed bytes alone and valid (flags 0: no stale window, version or
 * tags), read without building a Header (a store reads it on every write); null for anything else, which readHeader
 * decides. */
export function fixedOnlyExpiresAt(data: Uint8Array): Millis | null {
  if (data.length < FIXED_HEADER || data[0] !== MAGIC[0] || data[1] !== MAGIC[1] || data[2] !== FORMAT_VERSION)
    return null;
  const kind = data[3] as number;
  const serializer = data[4] as number;
  if (data[6] !== 0 || kind >= KINDS.length || serializer >= SERIALIZERS.length) return null;
  if ((data[5] as number) >= COMPRESSORS.length || (kind === 1 && serializer !== 1)) return null;
  return u64At(data, 15);
}

export function readHeader(data: Uint8Array): Header {
  const n = data.length;
  if (n < 2) {
    if (n === 1 && data[0] !== MAGIC[0]) throw new InvalidEntry("bad_magic", "first byte is not 0xc1");
    throw truncated("the magic", 2, n);
  }
  if (data[0] !== MAGIC[0] || data[1] !== MAGIC[1])
    throw new InvalidEntry("bad_magic", `first two bytes are ${hex2(data[0])} ${hex2(data[1])}, not c1 4c`);
  if (n < 3) throw truncated("the format byte", 3, n);
  if (data[2] !== FORMAT_VERSION) throw new InvalidEntry("unsupported_version", `format ${data[2]} (expected 1)`);
  if (n < FIXED_HEADER) throw truncated("the fixed header", FIXED_HEADER, n);
  const kind = KINDS[data[3] as number];
  if (kind === undefined) throw new InvalidEntry("unknown_codec", `kind ${data[3]}`);
  const serializer = SERIALIZERS[data[4] as number];
  if (serializer === undefined) throw new InvalidEntry("unknown_codec", `serializer ${data[4]}`);
  const compressor = COMPRESSORS[data[5] as number];
  if (compressor === undefined) throw new InvalidEntry("unknown_codec", `compressor ${data[5]}`);
  const flags = data[6] as number;
  if (flags & 0xf8) throw new InvalidEntry("bad_header", `reserved flag bits set (flags 0x${hex2(flags)})`);
  if (kind === "response" && serializer !== "msgpack")
    throw new InvalidEntry("bad_header", `a response entry with serializer ${serializer} (must be msgpack)`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const createdAt = u64At(data, 7);
  const expiresAt = u64At(data, 15);
  let pos = FIXED_HEADER;
  let staleMs: Millis = 0;
  if (flags & FLAG_STALE) {
    if (pos + 8 > n) throw truncated("the stale window", pos + 8, n);
    staleMs = u64At(data, pos);
    pos += 8;
  }
  const readString = (what: string): string => {
    if (pos + 2 > n) throw truncated(`the ${what} length`, pos + 2, n);
    const length = view.getUint16(pos, true);
    pos += 2;
    if (pos + length > n) throw truncated(`the ${what}`, pos + length, n);
    const text = utf8OrUndefined(data.subarray(pos, pos + length));
    if (text === undefined) throw new InvalidEntry("bad_header", `the ${what} is not UTF-8`);
    pos += length;
    return text;
  };
  let version: string | undefined;
  if (flags & FLAG_VERSION) version = readString("version");
  const tags: string[] = [];
  if (flags & FLAG_TAGS) {
    if (pos + 2 > n) throw truncated("the tag count", pos + 2, n);
    const count = view.getUint16(pos, true);
    pos += 2;
    for (let i = 0; i < count; i++) tags.push(readString("tag"));
  }
  return { kind, serializer, compressor, createdAt, expiresAt, staleMs, version, tags, size: pos };
}

function hex2(b: number | undefined): string {
  return (b ?? 0).toString(16).padStart(2, "0");
}

/** Writes `value` (checked by `u64`'s rules) as 8 little-endian bytes at `at`: a safe-integer number without a
 * BigInt (creating one per field was most of a header's cost), anything else through `u64`. */
function putU64(out: Uint8Array, at: number, value: Millis, what: string): void {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) {
    const low = value % 0x1_0000_0000;
    const high = (value - low) / 0x1_0000_0000;
    out[at] = low & 0xff;
    out[at + 1] = (low >>> 8) & 0xff;
    out[at + 2] = (low >>> 16) & 0xff;
    out[at + 3] = low >>> 24;
    out[at + 4] = high & 0xff;
    out[at + 5] = (high >>> 8) & 0xff;
    out[at + 6] = (high >>> 16) & 0xff;
    out[at + 7] = high >>> 24;
    return;
  }
  new DataView(out.buffer, out.byteOffset, out.byteLength).setBigUint64(at, u64(value, what), true);
}

/** Whether `value` is above zero (and valid: `u64` throws for anything else). */
function positive(value: Millis, what: string): boolean {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value > 0;
  return u64(value, what) > 0n;
}

function u64(value: Millis, what: string): bigint {
  const big = typeof value === "bigint" ? value : Number.isInteger(value) ? BigInt(value) : undefined;
  if (big === undefined || big < 0n || big > U64_MAX) throw new RangeError(`${what} must be an integer in 0..2^64-1`);
  return big;
}

export interface HeaderFields {
  kind: Kind;
  serializer: Serializer;
  compressor: Compressor;
  createdAt: Millis;
  expiresAt: Millis;
  staleMs: Millis;
  version: string | undefined;
  tags: readonly string[];
}

function packString(text: string, what: string): Uint8Array {
  if (!text.isWellFormed()) throw new RangeError(`the ${what} has a lone surrogate (not UTF-8)`);
  const bytes = utf8(text);
  if (bytes.length > 0xffff) throw new RangeError(`the ${what} is ${bytes.length} bytes, at most 65535`);
  return bytes;
}

/** The header bytes for these fields. */
export function packHeader(f: HeaderFields): Uint8Array {
  const stale = positive(f.staleMs, "staleMs");
  const version = f.version === undefined ? undefined : packString(f.version, "version");
  if (f.tags.length > 0xffff) throw new RangeError(`${f.tags.length} tags, at most 65535`);
  const tags = f.tags.length === 0 ? NO_TAGS : f.tags.map((t) => packString(t, "tag"));
  let size = FIXED_HEADER + (stale ? 8 : 0);
  if (version !== undefined) size += 2 + version.length;
  if (tags.length > 0) size += 2 + tags.reduce((sum, t) => sum + 2 + t.length, 0);
  const out = new Uint8Array(size);
  out[0] = MAGIC[0];
  out[1] = MAGIC[1];
  out[2] = FORMAT_VERSION;
  out[3] = KINDS.indexOf(f.kind);
  out[4] = SERIALIZERS.indexOf(f.serializer);
  out[5] = COMPRESSORS.indexOf(f.compressor);
  out[6] = (stale ? FLAG_STALE : 0) | (version !== undefined ? FLAG_VERSION : 0) | (tags.length ? FLAG_TAGS : 0);
  putU64(out, 7, f.createdAt, "createdAt");
  putU64(out, 15, f.expiresAt, "expiresAt");
  let pos = FIXED_HEADER;
  if (stale) {
    putU64(out, pos, f.staleMs, "staleMs");
    pos += 8;
  }
  const putU16 = (at: number, n: number): void => {
    out[at] = n & 0xff;
    out[at + 1] = n >>> 8;
  };
  if (version !== undefined) {
    putU16(pos, version.length);
    out.set(version, pos + 2);
    pos += 2 + version.length;
  }
  if (tags.length > 0) {
    putU16(pos, tags.length);
    pos += 2;
    for (const t of tags) {
      putU16(pos, t.length);
      out.set(t, pos + 2);
      pos += 2 + t.length;
    }
  }
  return out;
}

const NO_TAGS: readonly Uint8Array[] = [];

/** Whether these fields need only the 23 fixed bytes (no stale window, version or tags): writeFixedHeader's case. */
export function fixedOnly(staleMs: Millis, version: string | undefined, tags: readonly string[]): boolean {
  return staleMs === 0 && version === undefined && tags.length === 0;
}

/** The 23 fixed header bytes (no stale window, version or tags, flags 0) written into `out` from 0, without
 * allocating: what packHeader writes for such fields. */
export function writeFixedHeader(
  out: Uint8Array,
  kind: Kind,
  serializer: Serializer,
  compressor: Compressor,
  createdAt: Millis,
  expiresAt: Millis,
): void {
  out[0] = MAGIC[0];
  out[1] = MAGIC[1];
  out[2] = FORMAT_VERSION;
  out[3] = KINDS.indexOf(kind);
  out[4] = SERIALIZERS.indexOf(serializer);
  out[5] = COMPRESSORS.indexOf(compressor);
  out[6] = 0;
  putU64(out, 7, createdAt, "createdAt");
  putU64(out, 15, expiresAt, "expiresAt");
}
