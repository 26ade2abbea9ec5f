// Cache directives as larder reads them (spec/HTTP.md §1.4): Cache-Control (a response's or a request's),
// Surrogate-Control and targeted fields such as CDN-Cache-Control (RFC 9213, an RFC 8941 Dictionary).

import { InvalidField, parseDictionary } from "./structuredFields.js";

/** Largest delta-seconds value (RFC 9111 §1.2.2); anything larger counts as this. */
export const MAX_DELTA_SECONDS = 2 ** 31;
const FLAGS = ["no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "must-understand"];
const NUMBERS = ["max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"];
const ACTED_ON = new Set([...FLAGS, ...NUMBERS]);

/** The directives larder acts on; a number is undefined when absent (an invalid one is 0). */
export class Directives {
  noStore = false;
  noCache = false;
  private = false;
  public = false;
  mustRevalidate = false;
  proxyRevalidate = false;
  mustUnderstand = false;
  maxAge: number | undefined;
  sMaxage: number | undefined;
  staleWhileRevalidate: number | undefined;
  staleIfError: number | undefined;

  setFlag(name: string): void {
    switch (name) {
      case "no-store":
        this.noStore = true;
        break;
      case "no-cache":
        this.noCache = true;
        break;
      case "private":
        this.private = true;
        break;
      case "public":
        this.public = true;
        break;
      case "must-revalidate":
        this.mustRevalidate = true;
        break;
      case "proxy-revalidate":
        this.proxyRevalidate = true;
        break;
      case "must-understand":
        this.mustUnderstand = true;
        break;
    }
  }

  setNumber(name: string, seconds: number): void {
    switch (name) {
      case "max-age":
        this.maxAge = seconds;
        break;
      case "s-maxage":
        this.sMaxage = seconds;
        break;
      case "stale-while-revalidate":
        this.staleWhileRevalidate = seconds;
        break;
      case "stale-if-error":
        this.staleIfError = seconds;
        break;
    }
  }

  /** Sets directive `name` (lowercase): flags whatever their argument, numbers as delta-seconds. */
  apply(name: string, argument: string | undefined): void {
    if (FLAGS.includes(name)) this.setFlag(name);
    else if (NUMBERS.includes(name)) this.setNumber(name, deltaSeconds(argument) ?? 0);
  }
}

/** delta-seconds: one or more ASCII digits, past 2^31 counting as 2^31; undefined for anything else. */
export function deltaSeconds(argument: string | undefined): number | undefined {
  if (argument === undefined || !/^[0-9]+$/.test(argument)) return undefined;
  const n = Number(argument);
  return Math.min(n, MAX_DELTA_SECONDS);
}

const lower = (s: string): string => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
const trim = (s: string): string => s.replace(/^[ \t]+|[ \t]+$/g, "");

/** The directives of every line of a Cache-Control field. */
export function parseCacheControl(lines: readonly string[]): Directives {
  const d = new Directives();
  const seen = new Set<string>();
  for (const line of lines) {
    for (const element of elements(line)) {
      const found = directive(element);
      if (found !== undefined && !seen.has(found[0])) {
        seen.add(found[0]);
        d.apply(found[0], found[1]);
      }
    }
  }
  return d;
}

/** The directives of Surrogate-Control, or undefined when it holds none larder acts on. */
export function parseSurrogateControl(lines: readonly string[]): Directives | undefined {
  const d = new Directives();
  const seen = new Set<string>();
  for (const line of lines) {
    for (const element of elements(line)) {
      if (hasUnquotedSemicolon(element)) continue;
      const found = directive(element);
      if (found === undefined || seen.has(found[0])) continue;
      let [name, argument] = found;
      seen.add(name);
      if (name === "max-age" && argument !== undefined) {
        const extended = /^([0-9]+)\+[0-9]+$/.exec(argument);
        if (extended !== null) argument = extended[1];
      }
      d.apply(name, argument);
    }
  }
  return [...seen].some((n) => ACTED_ON.has(n)) ? d : undefined;
}

/** The directives of a targeted field, or undefined when it is absent, empty or invalid. */
export function parseTargeted(lines: readonly string[]): Directives | undefined {
  if (lines.length === 0) return undefined;
  let members: ReturnType<typeof parseDictionary>;
  try {
    members = parseDictionary(lines.join(", "));
  } catch (e) {
    if (e instanceof InvalidField) return undefined;
    throw e;
  }
  if (members.size === 0) return undefined;
  const d = new Directives();
  for (const [key, value] of members) {
    if (NUMBERS.includes(key)) {
      if (typeof value !== "number" || value < 0) return undefined;
      d.setNumber(key, Math.min(value, MAX_DELTA_SECONDS));
    } else if (FLAGS.includes(key) || key === "immutable") {
      const listAllowed = (key === "no-cache" || key === "private") && typeof value === "string";
      if (value !== true && !listAllowed) return undefined;
      d.apply(key, undefined);
    }
  }
  return d;
}

/** The elements of one line of a comma-separated list: commas inside quoted strings do not split. */
function elements(line: string): string[] {
  const out: string[] = [];
  let current = "";
  let quoted = false;
  let escaped = false;
  for (const c of line) {
    if (quoted) {
      current += c;
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') quoted = false;
    } else if (c === '"') {
      quoted = true;
      current += c;
    } else if (c === ",") {
      out.push(current);
      current = "";
    } else current += c;
  }
  out.push(current);
  return out.map(trim).filter((e) => e !== "");
}

function directive(element: string): [string, string | undefined] | undefined {
  const eq = element.indexOf("=");
  const name = eq === -1 ? element : element.slice(0, eq);
  if (name === "" || name.includes(" ") || name.includes("\t")) return undefined;
  return [lower(name), eq === -1 ? undefined : unquote(element.slice(eq + 1))];
}

function unquote(argument: string): string {
  if (argument.length < 2 || argument[0] !== '"' || argument[argument.length - 1] !== '"') return argument;
  const inner = [...argument.slice(1, -1)];
  let out = "";
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i] as string;
    if (c === "\\") {
      i++;
      out += inner[i] ?? "";
    } else out += c;
  }
  return out;
}

function hasUnquotedSemicolon(element: string): boolean {
  let quoted = false;
  let escaped = false;
  for (const c of element) {
    if (quoted) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === ";") return true;
  }
  return false;
}
