// The four serializers of FORMAT.md §2. msgpack and json values go through larder's own canonical writers (so an
// uncompressed entry is byte-identical to Rust's, Python's and Ruby's) and strict readers (so TypeScript accepts
// exactly what the others do); every failure to read is InvalidEntry bad_value.

import { utf8, utf8OrUndefined } from "./bytes.js";
import { InvalidEntry } from "./errors.js";
import type { Serializer } from "./header.js";
import { JsonError, parseJson, writeJson } from "./json.js";
import { type DecodeMode, decodeMsgpack, encodeMsgpack, MsgpackError } from "./msgpack.js";
import { Float, Pairs, setOwn, type Value } from "./value.js";

/** `value` serialized with `name`. Throws TypeError/RangeError (EncodeError, JsonError) for what cannot be. */
export function serialize(name: Serializer, value: Value): Uint8Array {
  switch (name) {
    case "msgpack":
      return encodeMsgpack(value);
    case "json":
      return utf8(writeJson(value));
    case "text":
      if (typeof value !== "string") throw new TypeError(`the text serializer takes a string, not ${typeof value}`);
      if (!value.isWellFormed()) throw new TypeError("a string with a lone surrogate has no UTF-8 form");
      return utf8(value);
    case "raw":
      if (typeof value === "string") return utf8(value);
      if (value instanceof Uint8Array) return value;
      throw new TypeError("the raw serializer takes a Uint8Array or a string");
  }
}

/** The value a payload holds. mode "plain" gives JavaScript's natural types (numbers, objects); "faithful" keeps
 * floats as Float and maps as Pairs (display, vectors). */
export function deserialize(name: Serializer, payload: Uint8Array, mode: DecodeMode = "plain"): Value {
  switch (name) {
    case "raw":
      return payload;
    case "text": {
      const text = utf8OrUndefined(payload);
      if (text === undefined) throw new InvalidEntry("bad_value", "text payload is not UTF-8");
      return text;
    }
    case "msgpack":
      try {
        return decodeMsgpack(payload, mode);
      } catch (e) {
        if (e instanceof MsgpackError) throw new InvalidEntry("bad_value", `msgpack: ${e.message}`);
        throw e;
      }
    case "json": {
      const text = utf8OrUndefined(payload);
      if (text === undefined) throw new InvalidEntry("bad_value", "json payload is not UTF-8");
      try {
        const value = parseJson(text, { duplicates: mode === "faithful" ? "keep" : "last" });
        return mode === "faithful" ? value : plain(value);
      } catch (e) {
        if (e instanceof JsonError) throw new InvalidEntry("bad_value", `json: ${e.message}`);
        throw e;
      }
    }
  }
}

/** A parsed JSON value with JavaScript's natural shapes: Float as number, string-keyed Maps as objects. */
export function plain(value: Value): Value {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Map || value instanceof Pairs) {
    const entries = value instanceof Map ? [...value.entries()] : value.entries;
    const object: { [key: string]: Value } = {};
    for (const [k, v] of entries) {
      if (typeof k !== "string") return new Map(entries.map(([a, b]) => [plain(a), plain(b)]));
      setOwn(object, k, plain(v));
    }
    return object;
  }
  if (value instanceof Float) return value.value;
  return value;
}
