// What the vector checks share: a Case (a name and a check that throws on the first difference), the faithful
// reading of vector files (integers, floats and map order exactly as written), and value comparison.

import { fromBase64 } from "../../src/bytes.js";
import { parseJson } from "../../src/json.js";
import { Float, Pairs, type Value } from "../../src/value.js";

export interface Case {
  name: string;
  /** Throws (or rejects) on the first difference; the hostile_*.json cases talk to stores and servers, so async. */
  check: () => void | Promise<void>;
}

export class Mismatch extends Error {
  override readonly name = "AssertionError";
}

export function assert(ok: boolean, message: string): asserts ok {
  if (!ok) throw new Mismatch(message);
}

/** A vector file read faithfully: objects as Map, integers exact, floats as Float. */
export function readVectorText(text: string): Value {
  return parseJson(text, { duplicates: "last", maxDepth: 10_000 });
}

/** Field `name` of a vector object; throws TypeError (the file cannot be judged) when it is not an object. */
export function get(object: Value, name: string): Value {
  if (!(object instanceof Map)) throw new TypeError(`expected an object holding ${name}`);
  return object.get(name);
}

export function str(value: Value, what: string): string {
  if (typeof value !== "string") throw new TypeError(`${what} is not a string`);
  return value;
}

export function num(value: Value, what: string): number {
  if (typeof value !== "number") throw new TypeError(`${what} is not a number`);
  return value;
}

export function list(value: Value, what: string): Value[] {
  if (!Array.isArray(value)) throw new TypeError(`${what} is not a list`);
  return value;
}

/** The `name`d list of cases of a vector document. */
export function section(document: Value, name: string): Value[] {
  return list(get(document, name), name);
}

/** A Case per vector case, named by its `name` (with `prefix`). */
export function each(cases: Value[], check: (c: Value) => void | Promise<void>, prefix = ""): Case[] {
  return cases.map((c) => ({ name: prefix + str(get(c, "name"), "name"), check: () => check(c) }));
}

/** A vector's byte string: a string (its UTF-8) or {"$base64": "…"}. */
export function vectorBytes(item: Value): Uint8Array {
  if (typeof item === "string") return new Uint8Array(Buffer.from(item, "utf8"));
  return fromBase64(str(get(item, "$base64"), "$base64"));
}

function mapEntries(value: Value): Array<[Value, Value]> | undefined {
  if (value instanceof Map) return [...value.entries()];
  if (value instanceof Pairs) return value.entries;
  return undefined;
}

/** Whether two values are equal telling apart what JSON equality blurs: integers vs floats, float bits, map order. */
export function sameJson(actual: Value, expected: Value): boolean {
  if (expected === null || typeof expected === "boolean" || typeof expected === "string") return actual === expected;
  if (typeof expected === "number" || typeof expected === "bigint") return actual === expected;
  if (expected instanceof Float) {
    if (!(actual instanceof Float)) return false;
    return Number.isNaN(expected.value) ? Number.isNaN(actual.value) : Object.is(actual.value, expected.value);
  }
  if (expected instanceof Uint8Array)
    return actual instanceof Uint8Array && Buffer.from(actual).equals(Buffer.from(expected));
  if (Array.isArray(expected))
    return (
      Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => sameJson(actual[i], e))
    );
  const e = mapEntries(expected);
  const a = mapEntries(actual);
  if (e === undefined || a === undefined || a.length !== e.length) return false;
  return e.every(([k, v], i) => {
    const pair = a[i] as [Value, Value];
    return sameJson(pair[0], k) && sameJson(pair[1], v);
  });
}

export function show(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${v}n` : v instanceof Map ? [...v] : v)).slice(
      0,
      300,
    );
  } catch {
    return String(value);
  }
}
