// A strict JSON reader (RFC 8259) that keeps what JSON.parse loses and larder must not: an integer's exactness
// (bigint past 2^53; `1.0` stays a float), object order with integer-like keys, and, for display, duplicate keys.
// Used for the json serializer's faithful decode, the CLI's input and the vector files. Bounded: nesting past
// `maxDepth` is refused before it can exhaust the stack.

import { Float, MAX_NESTING, Pairs, type Value } from "./value.js";

export class JsonError extends Error {
  override readonly name = "JsonError";
}

export interface ParseOptions {
  /** "last": a duplicated key keeps its last value at its first position (a Map); "keep": every pair (Pairs). */
  duplicates?: "last" | "keep";
  /** Containers may nest this deep (the top-level value is level 0); deeper is a JsonError. */
  maxDepth?: number;
}

/** One JSON text. Integers (no fraction, no exponent) come back as number when safe, else bigint; other numbers
 * as `Float`; objects as Map (or Pairs with duplicates "keep"). */
export function parseJson(text: string, options: ParseOptions = {}): Value {
  const p = new Parser(text, options.duplicates ?? "last", options.maxDepth ?? MAX_NESTING);
  p.ws();
  const value = p.value(0);
  p.ws();
  if (p.pos !== text.length) throw new JsonError(`trailing characters at offset ${p.pos}`);
  return value;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

class Parser {
  pos = 0;
  constructor(
    readonly s: string,
    readonly duplicates: "last" | "keep",
    readonly maxDepth: number,
  ) {}

  ws(): void {
    const s = this.s;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else break;
    }
  }

  fail(what: string): never {
    throw new JsonError(`${what} at offset ${this.pos}`);
  }

  value(level: number): Value {
    const c = this.s[this.pos];
    if (c === "{") return this.object(level);
    if (c === "[") return this.array(level);
    if (c === '"') return this.string();
    if (this.s.startsWith("true", this.pos)) {
      this.pos += 4;
      return true;
    }
    if (this.s.startsWith("false", this.pos)) {
      this.pos += 5;
      return false;
    }
    if (this.s.startsWith("null", this.pos)) {
      this.pos += 4;
      return null;
    }
    return this.number();
  }

  number(): Value {
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.s);
    if (m === null) this.fail("expected a value");
    this.pos += m[0].length;
    if (m[1] === undefined && m[2] === undefined) {
      const n = Number(m[0]);
      if (Number.isSafeInteger(n)) return n === 0 ? 0 : n;
      return BigInt(m[0]);
    }
    const f = Number(m[0]);
    if (!Number.isFinite(f)) this.fail("number out of the float64 range");
    return new Float(f);
  }

  string(): string {
    const s = this.s;
    this.pos++;
    let out = "";
    let start = this.pos;
    for (;;) {
      if (this.pos >= s.length) this.fail("unterminated string");
      const c = s.charCodeAt(this.pos);
      if (c === 0x22) {
        out += s.slice(start, this.pos);
        this.pos++;
        break;
      }
      if (c < 0x20) this.fail("control character in a string");
      if (c !== 0x5c) {
        this.pos++;
        continue;
      }
      out += s.slice(start, this.pos);
      const e = s[this.pos + 1];
      this.pos += 2;
      switch (e) {
        case '"':
          out += '"';
          break;
        case "\\":
          out += "\\";
          break;
        case "/":
          out += "/";
          break;
        case "b":
          out += "\b";
          break;
        case "f":
          out += "\f";
          break;
        case "n":
          out += "\n";
          break;
        case "r":
          out += "\r";
          break;
        case "t":
          out += "\t";
          break;
        case "u": {
          const hex = s.slice(this.pos, this.pos + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("bad \\u escape");
          out += String.fromCharCode(Number.parseInt(hex, 16));
          this.pos += 4;
          break;
        }
        default:
          this.fail("bad escape");
      }
      start = this.pos;
    }
    if (!out.isWellFormed()) this.fail("lone surrogate in a string");
    return out;
  }

  array(level: number): Value[] {
    if (level >= this.maxDepth) this.fail(`nested more than ${this.maxDepth} levels deep`);
    this.pos++;
    const out: Value[] = [];
    this.ws();
    if (this.s[this.pos] === "]") {
      this.pos++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value(level + 1));
      this.ws();
      const c = this.s[this.pos++];
      if (c === "]") return out;
      if (c !== ",") this.fail("expected , or ]");
    }
  }

  object(level: number): Value {
    if (level >= this.maxDepth) this.fail(`nested more than ${this.maxDepth} levels deep`);
    this.pos++;
    const pairs: Array<[Value, Value]> = [];
    const map = new Map<Value, Value>();
    this.ws();
    if (this.s[this.pos] === "}") {
      this.pos++;
      return this.duplicates === "keep" ? new Pairs(pairs) : map;
    }
    for (;;) {
      this.ws();
      if (this.s[this.pos] !== '"') this.fail("expected a string key");
      const key = this.string();
      this.ws();
      if (this.s[this.pos++] !== ":") this.fail("expected :");
      this.ws();
      const value = this.value(level + 1);
      if (this.duplicates === "keep") pairs.push([key, value]);
      else map.set(key, value);
      this.ws();
      const c = this.s[this.pos++];
      if (c === "}") break;
      if (c !== ",") this.fail("expected , or }");
    }
    return this.duplicates === "keep" ? new Pairs(pairs) : map;
  }
}

/** `text` as a JSON string literal the way larder writes them: non-ASCII as itself, `\b \f \n \r \t` short,
 * other controls `\u00xx`. */
export function quoteJson(text: string): string {
  let out = '"';
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += text.slice(start, i);
    start = i + 1;
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 0x08) out += "\\b";
    else if (c === 0x0c) out += "\\f";
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else out += `\\u${c.toString(16).padStart(4, "0")}`;
  }
  return `${out + text.slice(start)}"`;
}

/** Python's repr of a float64: the shortest text that reads back, positional for exponents −4..15, else
 * scientific with a sign and two or more exponent digits. */
export function floatText(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "Infinity";
  if (n === -Infinity) return "-Infinity";
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = n.toExponential().split("e") as [string, string];
  const e = Number(exp);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (e >= -4 && e < 16) {
    if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
    const intPart = digits.slice(0, e + 1).padEnd(e + 1, "0");
    const frac = digits.slice(e + 1);
    return `${sign}${intPart}.${frac === "" ? "0" : frac}`;
  }
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const es = `${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  return `${sign}${m}e${es}`;
}

/** Compact JSON of a value (json serializer): map order kept, floats as Python's repr (finite only). */
export function writeJson(value: Value, level = 0): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new JsonError("JSON has no NaN or Infinity");
      return Number.isSafeInteger(value) ? String(value === 0 ? 0 : value) : floatText(value);
    case "bigint":
      return value.toString();
    case "string":
      if (!value.isWellFormed()) throw new JsonError("a string with a lone surrogate has no UTF-8 form");
      return quoteJson(value);
    default:
      break;
  }
  if (value instanceof Float) {
    if (!Number.isFinite(value.value)) throw new JsonError("JSON has no NaN or Infinity");
    return floatText(value.value);
  }
  if (level >= MAX_NESTING) throw new JsonError(`value nested more than ${MAX_NESTING} levels deep`);
  if (Array.isArray(value)) return `[${value.map((v) => writeJson(v, level + 1)).join(",")}]`;
  let entries: Array<[Value, Value]>;
  if (value instanceof Map) entries = [...value.entries()];
  else if (value instanceof Pairs) entries = value.entries;
  else if (value instanceof Uint8Array || typeof value !== "object") throw new JsonError("not a JSON value");
  else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)
    entries = Object.entries(value);
  else throw new JsonError("not a JSON value");
  const parts: string[] = [];
  for (const [k, v] of entries) {
    if (typeof k !== "string") throw new JsonError("JSON object keys are strings");
    parts.push(`${writeJson(k)}:${writeJson(v, level + 1)}`);
  }
  return `{${parts.join(",")}}`;
}
