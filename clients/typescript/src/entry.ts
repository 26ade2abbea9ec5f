// Encoding and decoding whole entries (FORMAT.md §1–§4): header, then the serialized value or HTTP response,
// compressed only when it is long enough and the compressed form is strictly shorter (§3).

import { concat } from "./bytes.js";
import { COMPRESSORS, type Compressor, compress, DEFAULT_MAX_SIZE, decompress } from "./compressors.js";
import {
  COMPRESSOR_OFFSET,
  type Header,
  hardExpiry,
  type Kind,
  type Millis,
  packHeader,
  readHeader,
  type Serializer,
} from "./header.js";
import type { DecodeMode } from "./msgpack.js";
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
    const sum = BigInt(createdAt) + BigInt(o.ttlMs);
    const capped = sum > 2n ** 64n - 1n ? 2n ** 64n - 1n : sum;
    expiresAt = o.ttlMs === 0 ? 0 : capped <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(capped) : capped;
  }
  const header = packHeader({
    kind,
    serializer,
    compressor: "none",
    createdAt,
    expiresAt,
    staleMs: o.staleMs ?? 0,
    version: o.version,
    tags: o.tags ?? [],
  });
  if (compressor !== "none" && payload.length >= threshold) {
    const compressed = compress(compressor, payload, o.level);
    if (compressed.length < payload.length) {
      header[COMPRESSOR_OFFSET] = COMPRESSORS.indexOf(compressor);
      return concat([header, compressed]);
    }
  }
  return concat([header, payload]);
}
