// entries.json and invalid.json: every valid entry decodes to its header and value and encodes (unless
// decode_only) to an entry that decodes the same, byte for byte the vector's when uncompressed; every invalid
// entry is refused with its error kind, by decode and by inspect alike.

import { fromBase64, fromHex, toHex } from "../../src/bytes.js";
import type { Compressor } from "../../src/compressors.js";
import { DEFAULT_MAX_SIZE } from "../../src/compressors.js";
import { decode, type EncodeOptions, type Entry, encode, encodeResponse } from "../../src/entry.js";
import { InvalidEntry } from "../../src/errors.js";
import { peekExpiresAt, readHeader, type Serializer } from "../../src/header.js";
import { inspectText } from "../../src/report.js";
import { type ContentEncoding, HttpResponse } from "../../src/response.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, num, sameJson, section, show, str, vectorBytes } from "./common.js";

export function validCases(document: Value): Case[] {
  return each(section(document, "cases"), checkValid);
}

export function invalidCases(document: Value): Case[] {
  return each(section(document, "cases"), checkInvalid);
}

function vectorResponse(c: Value): HttpResponse {
  const r = get(c, "response");
  const headers = list(get(r, "headers"), "headers").map((h) => {
    const [n, v] = list(h, "header") as [Value, Value];
    return [vectorBytes(n), vectorBytes(v)] as const;
  });
  return new HttpResponse(
    num(get(r, "status"), "status"),
    headers,
    fromBase64(str(get(r, "body_base64"), "body_base64")),
    str(get(r, "content_encoding"), "content_encoding") as ContentEncoding,
  );
}

function vectorValue(c: Value): Value {
  const serializer = get(get(c, "options"), "serializer");
  if (serializer === "raw") return fromBase64(str(get(c, "value_base64"), "value_base64"));
  if (serializer === "text") return str(get(c, "value_text"), "value_text");
  return get(c, "value");
}

function checkValid(c: Value): void {
  const data = fromHex(str(get(c, "entry_hex"), "entry_hex"));
  const options = get(c, "options");
  checkDecoded(decode(data, { mode: "faithful" }), c);
  const header = readHeader(data);
  assert(header.kind === get(c, "kind"), "readHeader kind");
  assert(header.compressor === get(c, "stored_compressor"), "readHeader compressor");
  assert(header.expiresAt === get(options, "expires_at"), "readHeader expires_at");
  assert(peekExpiresAt(data) === get(options, "expires_at"), "peekExpiresAt");
  if (get(c, "decode_only") === true) return;
  const encoded = encodeCase(c);
  checkDecoded(decode(encoded, { mode: "faithful" }), c);
  if (get(c, "stored_compressor") === "none")
    assert(toHex(encoded) === get(c, "entry_hex"), `not byte-identical: ${toHex(encoded).slice(0, 200)}`);
}

function checkDecoded(entry: Entry, c: Value): void {
  const o = get(c, "options");
  const got = [entry.kind, entry.serializer, entry.compressor, entry.createdAt, entry.expiresAt, entry.staleMs];
  const want = [
    get(c, "kind"),
    get(o, "serializer"),
    get(c, "stored_compressor"),
    get(o, "created_at"),
    get(o, "expires_at"),
    get(o, "stale_ms"),
  ];
  assert(
    got.every((g, i) => g === want[i]),
    `header ${show(got)} != ${show(want)}`,
  );
  assert(entry.version === (get(o, "version") ?? undefined), `version ${entry.version}`);
  assert(sameJson(entry.tags, get(o, "tags")), `tags ${show(entry.tags)}`);
  if (get(c, "kind") === "response") {
    const want = vectorResponse(c);
    const r = entry.value;
    assert(r instanceof HttpResponse, "not a response");
    assert(r.status === want.status, "status");
    assert(
      sameJson(
        r.headers.map(([n, v]) => [n, v]),
        want.headers.map(([n, v]) => [n, v]),
      ),
      "headers",
    );
    assert(Buffer.from(r.body).equals(Buffer.from(want.body)), "body");
    assert(r.contentEncoding === want.contentEncoding, "content_encoding");
  } else {
    assert(sameJson(entry.value as Value, vectorValue(c)), `${show(entry.value)} != ${show(vectorValue(c))}`);
  }
}

function encodeCase(c: Value): Uint8Array {
  const o = get(c, "options");
  const level = get(o, "level");
  const common: EncodeOptions = {
    compressor: str(get(o, "compressor"), "compressor") as Compressor,
    threshold: num(get(o, "threshold"), "threshold"),
    level: level === null ? null : num(level, "level"),
    createdAt: get(o, "created_at") as number | bigint,
    expiresAt: get(o, "expires_at") as number | bigint,
    staleMs: get(o, "stale_ms") as number | bigint,
    version: (get(o, "version") ?? undefined) as string | undefined,
    tags: list(get(o, "tags"), "tags").map((t) => str(t, "tag")),
  };
  if (get(c, "kind") === "response") return encodeResponse(vectorResponse(c), common);
  return encode(vectorValue(c), { ...common, serializer: str(get(o, "serializer"), "serializer") as Serializer });
}

function checkInvalid(c: Value): void {
  const data = fromHex(str(get(c, "entry_hex"), "entry_hex"));
  const maxSize = (get(c, "max_size") ?? DEFAULT_MAX_SIZE) as number;
  const expected = str(get(c, "error"), "error");
  const readers: Array<[string, () => unknown]> = [
    ["decode", () => decode(data, { maxSize })],
    ["inspect", () => inspectText(data, { maxSize })],
  ];
  for (const [what, read] of readers) {
    let refused: InvalidEntry | undefined;
    try {
      read();
    } catch (e) {
      if (!(e instanceof InvalidEntry)) throw e;
      refused = e;
    }
    assert(refused !== undefined, `${what} accepted it; expected ${expected}`);
    assert(refused.kind === expected, `${what}: ${refused.kind} (${refused.detail}), not ${expected}`);
  }
}
