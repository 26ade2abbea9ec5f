// Keys every larder language derives identically (FORMAT.md §5), so an entry written by one is found by another:
// safe keys (memcached's rules), namespaces, HTTP request keys, Vary variants and alternate codings, and the
// stores' own keys (STORES.md §2). Lengths are UTF-8 bytes; case changes are ASCII-only; nothing is decoded.

import { createHash } from "node:crypto";
import { utf8, utf8Lossy } from "./bytes.js";
import { CONTENT_ENCODINGS, type ContentEncoding } from "./response.js";

export const MAX_KEY_LEN = 250;
export const HASHED_PREFIX_LEN = 180;
export const DEFAULT_DROP: readonly string[] = ["utm_*", "gclid", "fbclid", "msclkid"];

/** A request's header lines, in order, duplicates kept; a value is text or the bytes received. */
export type RequestHeaders = ReadonlyArray<readonly [string, string | Uint8Array]>;

/** Printable ASCII without space, char by char: for the short keys a cache sees, 3-4x faster than a regexp test
 * (19 -> 5 ns for a 7-character key, node 20), which a memory hit pays on every call. */
function safeAscii(key: string): boolean {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** `key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key's UTF-8.
 * A string with an unpaired surrogate has no UTF-8 to check or hash (an encoder would put U+FFFD in its place, the
 * bytes of another key): it is returned as it is, for the store to refuse as invalid_key (STORES.md §2). */
export function safeKey(key: string): string {
  if (key.length <= MAX_KEY_LEN && safeAscii(key)) return key;
  if (!key.isWellFormed()) return key;
  const raw = utf8(key);
  if (raw.length <= MAX_KEY_LEN && raw.every((b) => b > 0x20 && b !== 0x7f)) return key;
  let prefix = 0;
  while (prefix < HASHED_PREFIX_LEN && prefix < raw.length) {
    const b = raw[prefix] as number;
    if (b < 0x21 || b > 0x7e) break;
    prefix++;
  }
  return `${key.slice(0, prefix)}#${createHash("sha256").update(raw).digest("hex")}`;
}

/** `namespace:key` (just `key` when the namespace is empty), made safe. */
export function namespacedKey(namespace: string, key: string): string {
  return safeKey(namespace ? `${namespace}:${key}` : key);
}

const asciiUpper = (s: string): string => s.replace(/[a-z]+/g, (m) => m.toUpperCase());
const asciiLower = (s: string): string => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
const paramName = (part: string): string => {
  const eq = part.indexOf("=");
  return eq === -1 ? part : part.slice(0, eq);
};

function dropped(name: string, patterns: readonly string[]): boolean {
  for (const p of patterns) {
    if (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p) return true;
  }
  return false;
}

function normalizeAuthority(scheme: string, authority: string): string {
  const host = asciiLower(authority.slice(authority.lastIndexOf("@") + 1));
  if (host.endsWith(":")) return host.slice(0, -1);
  const port = scheme === "http" ? ":80" : scheme === "https" ? ":443" : undefined;
  if (port !== undefined && host.endsWith(port)) return host.slice(0, -port.length);
  return host;
}

const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

export interface HttpKeyOptions {
  namespace?: string;
  /** Query parameter names to leave out; `prefix*` matches names starting with prefix. */
  drop?: readonly string[];
}

/** The key of a request from its parts as a server sees them (FORMAT.md §5.3). */
export function httpKey(
  method: string,
  scheme: string,
  authority: string,
  pathAndQuery: string,
  options: HttpKeyOptions = {},
): string {
  const drop = options.drop ?? DEFAULT_DROP;
  const s = asciiLower(scheme);
  let base = `${asciiUpper(method)}:${s}://${normalizeAuthority(s, authority)}`;
  const hash = pathAndQuery.indexOf("#");
  const target = hash === -1 ? pathAndQuery : pathAndQuery.slice(0, hash);
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? "" : target.slice(q + 1);
  base += path || "/";
  const parts = query.split("&").filter((p) => p !== "" && !dropped(paramName(p), drop));
  // Array.prototype.sort is stable: parts with the same name keep their order.
  parts.sort((a, b) => byteOrder(paramName(a), paramName(b)));
  if (parts.length > 0) base += `?${parts.join("&")}`;
  return namespacedKey(options.namespace ?? "", base);
}

/** The key of a request given as URL text `scheme://authority/path?query`; throws RangeError without `://`. */
export function urlKey(method: string, url: string, options: HttpKeyOptions = {}): string {
  const sep = url.indexOf("://");
  if (sep === -1) throw new RangeError(`not an absolute URL (no "://"): ${url}`);
  const scheme = url.slice(0, sep);
  const rest = url.slice(sep + 3);
  let end = rest.length;
  for (const stop of "/?#") {
    const found = rest.indexOf(stop);
    if (found !== -1) end = Math.min(end, found);
  }
  return httpKey(method, scheme, rest.slice(0, end), rest.slice(end), options);
}

/** The selecting values of a request for a marker's Vary names (FORMAT.md §5.4). */
export function selectingValues(names: readonly string[], requestHeaders: RequestHeaders): string {
  let out = "";
  for (const name of names) {
    const wanted = asciiLower(name);
    const lines = requestHeaders
      .filter(([n]) => asciiLower(n) === wanted)
      .map(([, v]) => (typeof v === "string" ? v : utf8Lossy(v)));
    if (lines.length === 0) {
      out += `${name}\u0000absent\n`;
      continue;
    }
    const elements = lines.flatMap((line) => line.split(",")).map((e) => e.replace(/^[ \t]+|[ \t]+$/g, ""));
    out += `${name}:${elements.join(",")}\n`;
  }
  return out;
}

/** A Vary marker: the map a base key holds for a varying response. */
export interface VaryMarker {
  vary: string[];
  generation?: string | undefined;
}

function markerFields(marker: unknown): [string[], string | undefined] {
  const get = (k: string): unknown =>
    marker instanceof Map
      ? marker.get(k)
      : typeof marker === "object" && marker !== null
        ? (marker as Record<string, unknown>)[k]
        : undefined;
  if (typeof marker !== "object" || marker === null || Array.isArray(marker))
    throw new RangeError("a Vary marker is a map");
  const vary = get("vary");
  const generation = get("generation");
  if (!Array.isArray(vary) || !vary.every((n) => typeof n === "string"))
    throw new RangeError("a Vary marker's vary is a list of header names");
  if (generation !== undefined && generation !== null && typeof generation !== "string")
    throw new RangeError("a Vary marker's generation is a string");
  return [vary as string[], (generation ?? undefined) as string | undefined];
}

/** The key of the variant a request selects under `marker` (FORMAT.md §5.4). */
export function variantKey(
  baseKey: string,
  marker: VaryMarker | Map<unknown, unknown>,
  requestHeaders: RequestHeaders,
): string {
  const [vary, generation] = markerFields(marker);
  const selecting = selectingValues(vary, requestHeaders);
  if (generation === undefined) return safeKey(`${baseKey}\n${selecting}`);
  return safeKey(`${baseKey}\n\u0000generation:${generation}\n${selecting}`);
}

/** The key a response stored under `entryKey` is kept under in another coding (FORMAT.md §5.5). */
export function alternateKey(entryKey: string, coding: ContentEncoding): string {
  if (!CONTENT_ENCODINGS.includes(coding)) throw new RangeError(`coding is one of ${CONTENT_ENCODINGS.join(", ")}`);
  return safeKey(`${entryKey}\n\u0000coding:${coding}`);
}

/** `baseKey` and its four alternates: what a URL purge removes. */
export function urlKeys(baseKey: string): string[] {
  return [baseKey, ...CONTENT_ENCODINGS.map((c) => alternateKey(baseKey, c))];
}

/** Why a store may not take `key` (STORES.md §2), or undefined when it may. */
const PLAIN_KEY = /^[\x21-\x7e]{1,250}$/;

/** The rule is checked on the key's UTF-8 bytes, the bytes every store writes (STORES.md §2, "wire bytes are the
 * checked bytes"): a string that has none (an unpaired surrogate) is refused before it is encoded. */
export function keyProblem(key: string): string | undefined {
  // A JavaScript caller may hand over anything: bytes are not a key (the regex would read a Buffer as its text).
  if (typeof key !== "string") return "a key is a string";
  if (PLAIN_KEY.test(key)) return undefined; // the common case, without encoding: ASCII is its own UTF-8
  if (key.length === 0) return "the key is empty";
  if (!key.isWellFormed()) return "the key holds a lone surrogate (it has no UTF-8 form)";
  const raw = utf8(key);
  if (raw.length > MAX_KEY_LEN) return `the key is ${raw.length} bytes, at most ${MAX_KEY_LEN}`;
  if (!raw.every((b) => b > 0x20 && b !== 0x7f)) return "the key holds a space or a control character";
  return undefined;
}

/** Why a store may not take `tag` for purge_tag, or undefined: tags are free UTF-8 (STORES.md §2), so only a string
 * without a UTF-8 form (an unpaired surrogate, which an encoder would turn into another tag's U+FFFD) is refused. */
export function tagProblem(tag: string): string | undefined {
  if (typeof tag !== "string") return "a tag is a string";
  return tag.isWellFormed() ? undefined : "the tag holds a lone surrogate (it has no UTF-8 form)";
}

/** Why a store may not take `prefix` for purge_prefix, or undefined (the empty prefix is allowed). */
export function prefixProblem(prefix: string): string | undefined {
  if (typeof prefix !== "string") return "a prefix is a string";
  return prefix === "" ? undefined : keyProblem(prefix);
}

/** The key as the server sees it: `safeKey(prefix + key)`, or `key` itself without a prefix. */
export function storedKey(prefix: string, key: string): string {
  return prefix ? safeKey(prefix + key) : key;
}

/** A store's bookkeeping key (locks, purge records, tag indexes): `larder#<sha256>` after the prefix. */
export function internalKey(prefix: string, purpose: string, name: string): string {
  return storedKey(prefix, safeKey(`larder\u0000${purpose}:${name}`));
}

/** The lock guarding `key` (STORES.md §3). */
export function lockKey(prefix: string, key: string): string {
  return internalKey(prefix, "lock", key);
}
