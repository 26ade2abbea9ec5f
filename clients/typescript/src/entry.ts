// Encoding and decoding whole entries (FORMAT.md §1–§4): header, then the serialized value or HTTP response,
// compressed only when it is long enough and the compressed form is strictly shorter (§3).

import { COMPRESSORS, type Compressor, compress, DEFAULT_MAX_SIZE, decompress } from "./compressors.js";
import {
  COMPRESSOR_OFFSET,
  FIXED_HEADER,
  fixedOnly,
  type Header,
  hardExpiry,
  type Kind,
  type Millis,
  packHeader,
  readHeader,
  type Serializer,
  writeFixedHeader,
} from "./header.js";
import { lz4CompressInto } from "./lz4.js";
import { type DecodeMode, withEncoded } from "./msgpack.js";
import { HttpResponse } from "./response.js";
import { deserialize, serialize } from "./serializers.js";
import type { Value } from "./value.js";

/** Payloads shorter than this are stored uncompressed unless told otherwise. */
export const DEFAULT_THRESHOLD = 1024;

export interface EncodeOptions {
  /** "msgpack" (default), "json", "text" (a string) or "raw" (bytes, or a string stored as UTF-8). */
  serializer?: Serializer;
  /** "lz4" (default), "snappy", "zstd", "brotli", "gzip" or "none"; kept only when it shrinks the payload. */
  compressor?: Compressor;
  /** Compress only payloads at least this long (default 1024). */
  threshold?: number;
  level?: number | null;
  /** ms since the epoch; default now. */
  createdAt?: Millis;
  /** Time to live in ms (0 = never expires); or give `expiresAt`, not both. */
  ttlMs?: number;
  /** Absolute expiry in ms (0 = never). */
  expiresAt?: Millis;
  /** How long past expiry the entry may still be served while it is recomputed. */
  staleMs?: Millis;
  version?: string | undefined;
  tags?: readonly string[];
}

export interface Entry extends Omit<Header, "size"> {
  /** The value (kind "value") or an HttpResponse (kind "response"). */
  value: Value | HttpResponse;
}

export function nowMs(): number {
  return Date.now();
}

/** `value` as a value entry (kind 0). */
export function encode(value: Value, options: EncodeOptions = {}): Uint8Array {
  const serializer = options.serializer ?? "msgpack";
  // MessagePack is written into the encoder's reused buffer and compressed or copied from there into the entry.
  if (serializer === "msgpack") return withEncoded(value, (payload) => build("value", serializer, payload, options));
  return build("value", serializer, serialize(serializer, value), options);
}

/** An HTTP response as a kind-1 entry (always msgpack). */
export function encodeResponse(response: HttpResponse, options: Omit<EncodeOptions, "serializer"> = {}): Uint8Array {
  if (!(response instanceof HttpResponse)) throw new TypeError("encodeResponse takes an HttpResponse");
  return build("response", "msgpack", response.toPayload(), options);
}

/** An already serialized payload (its bytes in `serializer`'s form) as a value entry: for callers that hold the
 * serialized text themselves (Keyv's JSON). The payload is not checked against the serializer. */
export function encodeSerialized(
  payload: Uint8Array,
  serializer: Serializer,
  options: Omit<EncodeOptions, "serializer"> = {},
): Uint8Array {
  return build("value", serializer, payload, options);
}

export interface DecodeOptions {
  /** The decompressed-size limit (default 64 MiB). */
  maxSize?: number;
  /** "plain" (default): JavaScript's natural types; "faithful": Float and Pairs kept (display, vectors). */
  mode?: DecodeMode;
}

/** A whole entry; throws InvalidEntry (its `kind` says why) for any bytes that are not one. */
export function decode(data: Uint8Array, options: DecodeOptions = {}): Entry {
  const [header, payload] = decodePayload(data, options.maxSize);
  const { size: _size, ...fields } = header;
  const value =
    header.kind === "response"
      ? HttpResponse.fromPayload(payload)
      : deserialize(header.serializer, payload, options.mode ?? "plain");
  return { ...fields, value };
}

/** The header and the decompressed (still serialized) payload. */
export function decodePayload(data: Uint8Array, maxSize = DEFAULT_MAX_SIZE): [Header, Uint8Array] {
  if (!(data instanceof Uint8Array)) throw new TypeError("an entry is a Uint8Array");
  if (!Number.isSafeInteger(maxSize) || maxSize < 0) throw new RangeError("maxSize must be a non-negative integer");
  const header = readHeader(data);
  return [header, decompress(header.compressor, data.subarray(header.size), maxSize)];
}

/** When an entry can no longer be served, even stale (ms), or undefined for never. */
export function entryHardExpiry(entry: Pick<Header, "expiresAt" | "staleMs">): number | undefined {
  return hardExpiry(entry.expiresAt, entry.staleMs);
}

function build(kind: Kind, serializer: Serializer, payload: Uint8Array, o: EncodeOptions): Uint8Array {
  const compressor = o.compressor ?? "lz4";
  if (!COMPRESSORS.includes(compressor)) throw new RangeError(`unknown compressor ${String(compressor)}`);
  const threshold = o.threshold ?? DEFAULT_THRESHOLD;
  if (!Number.isSafeInteger(threshold) || threshold < 0)
    throw new RangeError("threshold must be a non-negative integer");
  const createdAt = o.createdAt ?? nowMs();
  if (o.ttlMs !== undefined && o.expiresAt !== undefined) throw new RangeError("give ttlMs or expiresAt, not both");
  let expiresAt: Millis = o.expiresAt ?? 0;
  if (o.ttlMs !== undefined) {
    if (!Number.isSafeInteger(o.ttlMs) || o.ttlMs < 0) throw new RangeError("ttlMs must be a non-negative integer");
    expiresAt = o.ttlMs === 0 ? 0 : expiryAfter(createdAt, o.ttlMs);
  }
  const staleMs = o.staleMs ?? 0;
  const tags = o.tags ?? NO_TAGS;
  // The header's fixed part is written into the entry itself; a header with optional fields is packed first.
  const packed = fixedOnly(staleMs, o.version, tags)
    ? undefined
    : packHeader({ kind, serializer, compressor: "none", createdAt, expiresAt, staleMs, version: o.version, tags });
  const h = packed === undefined ? FIXED_HEADER : packed.length;
  const compressing = compressor !== "none" && payload.length >= threshold;
  let out: Uint8Array;
  let length = h + payload.length;
  let used: Compressor = "none";
  if (compressing && compressor === "lz4" && payload.length < LZ4_IN_PLACE_BELOW) {
    // LZ4 straight into the entry behind the header, kept only if strictly shorter than the payload; else the
    // payload goes into the same buffer.
    out = allocate(h + payload.length);
    const written = lz4CompressInto(payload, out, h, payload.length - 1);
    if (written > 0) {
      length = h + written;
      used = "lz4";
    } else out.set(payload, h);
  } else if (compressing && compressor === "lz4") {
    // A large payload: compressed into a reused buffer, then the entry allocated at its exact size (a buffer of the
    // payload's size per write, mostly left unused, cost more in allocation and GC than the copy).
    if (lz4Scratch.length < payload.length) lz4Scratch = Buffer.allocUnsafeSlow(payload.length);
    const written = lz4CompressInto(payload, lz4Scratch, 0, payload.length - 1);
    out = allocate(h + (written > 0 ? written : payload.length));
    out.set(written > 0 ? lz4Scratch.subarray(0, written) : payload, h);
    length = out.length;
    if (written > 0) used = "lz4";
    if (lz4Scratch.length > SCRATCH_KEEP) lz4Scratch = Buffer.allocUnsafeSlow(64 * 1024);
  } else {
    const compressed = compressing ? compress(compressor, payload, o.level) : payload;
    const shorter = compressed.length < payload.length;
    out = allocate(h + (shorter ? compressed.length : payload.length));
    out.set(shorter ? compressed : payload, h);
    length = out.length;
    if (shorter) used = compressor;
  }
  if (packed === undefined) writeFixedHeader(out, kind, serializer, used, createdAt, expiresAt);
  else {
    out.set(packed, 0);
    out[COMPRESSOR_OFFSET] = COMPRESSORS.indexOf(used);
  }
  return length === out.length ? out : out.subarray(0, length);
}

/** Payloads below this are compressed in place in a buffer of their own size (from Node's pool: cheap); larger
 * ones through lz4Scratch. */
const LZ4_IN_PLACE_BELOW = 4096;
let lz4Scratch = Buffer.allocUnsafeSlow(64 * 1024);

/** createdAt + ttlMs as a u64 (capped at 2^64 − 1): a number while it is a safe integer, a bigint beyond. */
function expiryAfter(createdAt: Millis, ttlMs: number): Millis {
  if (typeof createdAt === "number") {
    const sum = createdAt + ttlMs;
    if (Number.isSafeInteger(sum)) return sum;
  }
  const sum = BigInt(createdAt) + BigInt(ttlMs);
  const capped = sum > 2n ** 64n - 1n ? 2n ** 64n - 1n : sum;
  return capped <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(capped) : capped;
}

/** `size` bytes, not zeroed (every byte is written before it is read), from Node's pool when small. */
function allocate(size: number): Uint8Array {
  const b = Buffer.allocUnsafe(size);
  return new Uint8Array(b.buffer, b.byteOffset, size);
}

const NO_TAGS: readonly string[] = [];

/** The UTF-8 of texts being encoded (encodeText), reused: its bytes are always compressed or copied into the entry,
 * never handed out. Texts longer than SCRATCH_KEEP bytes get a buffer of their own. */
let scratch = Buffer.allocUnsafeSlow(64 * 1024);
const SCRATCH_KEEP = 1 << 20;

/** `text` (Keyv's JSON, or a string for the text serializer) as a value entry: its UTF-8 written once, into a reused
 * buffer, then compressed or copied into the entry (the path of encodeSerialized(utf8(text), …) without the
 * intermediate array). The text is not checked against the serializer; a lone surrogate becomes U+FFFD, as in
 * utf8(). */
export function encodeText(
  text: string,
  serializer: "json" | "text",
  options: Omit<EncodeOptions, "serializer"> = {},
): Uint8Array {
  let buffer = scratch;
  if (text.length * 3 > buffer.length) {
    const needed = Buffer.byteLength(text, "utf8");
    if (needed > buffer.length) {
      buffer = Buffer.allocUnsafeSlow(needed);
      if (needed <= SCRATCH_KEEP) scratch = buffer;
    }
  }
  const n = buffer.write(text, 0, "utf8");
  return build("value", serializer, buffer.subarray(0, n), options);
}
