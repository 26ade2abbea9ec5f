// Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.
// Compact; floats as Python's repr; byte strings as text when UTF-8, else {"$base64":…}; ext as {"$ext":…};
// maps keep order and duplicates, a non-string key is written as its own display JSON, quoted. Bounded: past
// `limit` characters it throws DisplayTooLarge (a key that is a map doubles its escaping at every level).

import { toBase64, utf8OrUndefined } from "./bytes.js";
import { floatText, quoteJson } from "./json.js";
import { Ext, Float, isPlainObject, Pairs, type Value } from "./value.js";

export class DisplayTooLarge extends Error {
  override readonly name = "DisplayTooLarge";
}

/** A byte string's display JSON: a JSON string when it is UTF-8, else {"$base64":"…"}. */
export function bytesJson(data: Uint8Array): string {
  const text = utf8OrUndefined(data);
  return text === undefined ? `{"$base64":"${toBase64(data)}"}` : quoteJson(text);
}

/** A byte string in a human-form line: its text unquoted when UTF-8, else {"$base64":"…"}. */
export function bytesText(data: Uint8Array): string {
  return utf8OrUndefined(data) ?? `{"$base64":"${toBase64(data)}"}`;
}

/** On a terminal, inspect shows at most this many characters of a line's text unless --full. */
export const CUT_AT = 200;

/** `text` cut to `limit` code points followed by `… (N more characters)`. */
export function cutText(text: string, limit: number): string {
  const points = [...text];
  const more = points.length - limit;
  if (more <= 0) return text;
  return `${points.slice(0, limit).join("")}… (${more} more ${more === 1 ? "character" : "characters"})`;
}

/** The display JSON of a value decoded in "faithful" mode (or any Value). */
export function displayJson(value: Value, limit = Number.POSITIVE_INFINITY): string {
  const check = (n: number): void => {
    if (n > limit) throw new DisplayTooLarge(`the value's display JSON would exceed ${limit} characters`);
  };
  const show = (v: Value): string => {
    if (v === null || v === undefined) return "null";
    switch (typeof v) {
      case "boolean":
        return v ? "true" : "false";
      case "number":
        return Number.isInteger(v) && !Object.is(v, -0) && Math.abs(v) <= Number.MAX_SAFE_INTEGER
          ? String(v)
          : floatText(v);
      case "bigint":
        return v.toString();
      case "string":
        return quoteJson(v);
      default:
        break;
    }
    if (v instanceof Float) return floatText(v.value);
    if (v instanceof Uint8Array) return bytesJson(v);
    if (v instanceof Ext) return `{"$ext":${v.type},"$base64":"${toBase64(v.data)}"}`;
    const parts: string[] = [];
    let length = 2;
    const add = (text: string): void => {
      length += text.length + (parts.length > 0 ? 1 : 0);
      check(length);
      parts.push(text);
    };
    if (Array.isArray(v)) {
      for (const item of v) add(show(item));
      return `[${parts.join(",")}]`;
    }
    let entries: Iterable<[Value, Value]>;
    if (v instanceof Pairs) entries = v.entries;
    else if (v instanceof Map) entries = v.entries();
    else if (isPlainObject(v)) entries = Object.entries(v);
    else throw new TypeError(`cannot display a ${Object.prototype.toString.call(v)}`);
    for (const [k, item] of entries) {
      let key: string;
      if (typeof k === "string") key = quoteJson(k);
      else if (k instanceof Uint8Array && utf8OrUndefined(k) !== undefined) key = bytesJson(k);
      else {
        const inner = show(k);
        check(inner.length);
        key = quoteJson(inner);
      }
      check(key.length);
      add(`${key}:${show(item)}`);
    }
    return `{${parts.join(",")}}`;
  };
  const out = show(value);
  check(out.length);
  return out;
}
