// The HTTP response payload of a kind-1 entry (FORMAT.md §4): [status, [[name, value]…], body, content_encoding],
// names, values and body as bytes. Reading checks every element's type and range; anything else is bad_value.

import { utf8 } from "./bytes.js";
import { InvalidEntry } from "./errors.js";
import { decodeMsgpack, encodeMsgpack, MsgpackError } from "./msgpack.js";
import type { Value } from "./value.js";

export const CONTENT_ENCODINGS = ["identity", "gzip", "br", "zstd"] as const;
export type ContentEncoding = (typeof CONTENT_ENCODINGS)[number];
export type HeaderPart = Uint8Array | string;

function asBytes(value: HeaderPart, what: string): Uint8Array {
  if (typeof value === "string") return utf8(value);
  if (value instanceof Uint8Array) return value;
  throw new TypeError(`${what} must be a Uint8Array or a string`);
}

const lower = (b: Uint8Array): Uint8Array => b.map((c) => (c >= 0x41 && c <= 0x5a ? c + 32 : c));

/** A stored HTTP response. Header names and values are bytes (strings are stored as UTF-8). */
export class HttpResponse {
  readonly headers: ReadonlyArray<readonly [Uint8Array, Uint8Array]>;
  readonly body: Uint8Array;

  constructor(
    readonly status: number,
    headers: Iterable<readonly [HeaderPart, HeaderPart]> = [],
    body: HeaderPart = new Uint8Array(0),
    readonly contentEncoding: ContentEncoding = "identity",
  ) {
    if (!Number.isInteger(status) || status < 100 || status > 999)
      throw new RangeError(`status must be an integer in 100..999, not ${status}`);
    if (!CONTENT_ENCODINGS.includes(contentEncoding))
      throw new RangeError(`content encoding must be one of ${CONTENT_ENCODINGS.join(", ")}`);
    this.headers = [...headers].map(([n, v]) => [asBytes(n, "header name"), asBytes(v, "header value")] as const);
    this.body = asBytes(body, "body");
  }

  /** The first value of header `name` (case-insensitive), or undefined. */
  header(name: HeaderPart): Uint8Array | undefined {
    const wanted = Buffer.from(lower(asBytes(name, "header name")));
    for (const [n, v] of this.headers) if (wanted.equals(lower(n))) return v;
    return undefined;
  }

  /** The MessagePack payload of a kind-1 entry. */
  toPayload(): Uint8Array {
    return encodeMsgpack([this.status, this.headers.map(([n, v]) => [n, v]), this.body, this.contentEncoding]);
  }

  /** Parses a decompressed kind-1 payload; throws only InvalidEntry (bad_value). */
  static fromPayload(payload: Uint8Array): HttpResponse {
    let value: Value;
    try {
      value = decodeMsgpack(payload, "faithful");
    } catch (e) {
      if (e instanceof MsgpackError) throw bad(`msgpack: ${e.message}`);
      throw e;
    }
    if (!Array.isArray(value)) throw bad("a response is a MessagePack array");
    if (value.length < 4) throw bad(`response array has ${value.length} elements, needs at least 4`);
    const [status, headers, body, encoding] = value;
    if (typeof status !== "number" || !Number.isInteger(status)) throw bad("status is not an unsigned integer");
    if (status < 100 || status > 999) throw bad(`status ${status} is outside 100-999`);
    if (!Array.isArray(headers)) throw bad("headers are not an array");
    const pairs: Array<[Uint8Array, Uint8Array]> = [];
    for (const pair of headers) {
      if (!Array.isArray(pair) || pair.length !== 2) throw bad("a header must be a [name, value] pair");
      const [n, v] = pair;
      const name = typeof n === "string" ? utf8(n) : n;
      const val = typeof v === "string" ? utf8(v) : v;
      if (!(name instanceof Uint8Array) || !(val instanceof Uint8Array)) throw bad("a header part is not bin or str");
      pairs.push([name, val]);
    }
    if (!(body instanceof Uint8Array)) throw bad("body is not bin");
    if (typeof encoding !== "string") throw bad("content_encoding is not str");
    if (!(CONTENT_ENCODINGS as readonly string[]).includes(encoding)) throw bad(`unknown content_encoding ${encoding}`);
    return new HttpResponse(status, pairs, body, encoding as ContentEncoding);
  }
}

function bad(detail: string): InvalidEntry {
  return new InvalidEntry("bad_value", detail);
}
