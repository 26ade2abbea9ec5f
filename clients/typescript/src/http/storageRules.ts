// Whether larder, a shared cache, stores a response and for how long: the storage rules of spec/HTTP.md §1, which
// `larder serve` applies, so a page an app writes into a shared store is stored exactly as the front would store
// it. spec/vectors/storage.json is the contract. Pure: no I/O.

import { CONTENT_ENCODINGS } from "../response.js";
import {
  type Directives,
  deltaSeconds,
  MAX_DELTA_SECONDS,
  parseCacheControl,
  parseSurrogateControl,
  parseTargeted,
} from "./cacheDirectives.js";
import { parseHttpDate } from "./httpDate.js";

/** Statuses whose caching larder implements in full (for must-understand). */
export const UNDERSTOOD = new Set([200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501]);
/** Statuses a cache may give heuristic freshness (RFC 9110 §15.1). */
export const HEURISTICALLY_CACHEABLE = new Set([200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501]);

/** (name, value) header lines in message order; names in any case. */
export type HeaderLines = ReadonlyArray<readonly [string, string]>;

/** The settings of `larder serve`'s storage rules (spec/HTTP.md §1.8), its defaults; durations in whole seconds. */
export interface Rules {
  targetedFields: readonly string[];
  surrogateControl: boolean;
  heuristicMax: number;
  cacheSetCookie: boolean;
  staleWhileRevalidate: number;
  staleIfError: number;
  revalidationWindow: number;
  honorRequestCacheControl: boolean;
}

export const DEFAULT_RULES: Readonly<Rules> = Object.freeze({
  targetedFields: ["cdn-cache-control"],
  surrogateControl: true,
  heuristicMax: 0,
  cacheSetCookie: false,
  staleWhileRevalidate: 0,
  staleIfError: 300,
  revalidationWindow: 3600,
  honorRequestCacheControl: false,
});

/** How a storable response is stored: expires_at = response time + freshMs, stale_ms = keepStaleMs. */
export interface StorePlan {
  stored: true;
  freshMs: number;
  initialAgeMs: number;
  keepStaleMs: number;
  /** Request headers it varies on (lowercase, sorted, unique), accept-encoding left out when larder decodes. */
  vary: string[];
}

export type NotStoredReason =
  | "method"
  | "status"
  | "no-store"
  | "request-no-store"
  | "private"
  | "authorization"
  | "set-cookie"
  | "vary-star"
  | "no-explicit-freshness";

export interface NotStored {
  stored: false;
  reason: NotStoredReason;
}

const lower = (s: string): string => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
const trim = (s: string): string => s.replace(/^[ \t]+|[ \t]+$/g, "");

function lowercase(headers: HeaderLines): Array<[string, string]> {
  return headers.map(([n, v]) => [lower(n), v]);
}
function values(headers: ReadonlyArray<readonly [string, string]>, name: string): string[] {
  return headers.filter(([n]) => n === name).map(([, v]) => v);
}

const notStored = (reason: NotStoredReason): NotStored => ({ stored: false, reason });

/** Whether and how larder stores this response to this request (spec/HTTP.md §1.2, in its order). */
export function storage(
  rules: Rules,
  method: string,
  requestHeaders: HeaderLines,
  status: number,
  responseHeaders: HeaderLines,
  requestTimeMs: number,
  responseTimeMs: number,
): StorePlan | NotStored {
  if (method !== "GET") return notStored("method");
  if (status < 200 || status >= 600 || status === 206 || status === 304) return notStored("status");
  const request = lowercase(requestHeaders);
  const response = lowercase(responseHeaders);
  if (rules.honorRequestCacheControl && parseCacheControl(values(request, "cache-control")).noStore)
    return notStored("request-no-store");
  const [d, useExpires] = governing(rules, response);
  if (d.mustUnderstand) {
    if (!UNDERSTOOD.has(status)) return notStored("status");
  } else if (d.noStore) return notStored("no-store");
  if (d.private) return notStored("private");
  if (values(request, "authorization").length > 0 && !(d.public || d.mustRevalidate || d.sMaxage !== undefined))
    return notStored("authorization");
  if (values(response, "set-cookie").length > 0 && !rules.cacheSetCookie) return notStored("set-cookie");
  let vary = varyNames(response);
  if (vary === undefined) return notStored("vary-star");
  if (codingIsDecodable(response)) vary = vary.filter((n) => n !== "accept-encoding");
  const hasValidator = values(response, "etag").length > 0 || values(response, "last-modified").length > 0;
  let lifetime = lifetimeMs(rules, status, response, d, useExpires, responseTimeMs);
  if (lifetime === undefined) {
    if (!(hasValidator && (HEURISTICALLY_CACHEABLE.has(status) || d.public))) return notStored("no-explicit-freshness");
    lifetime = 0;
  }
  const initialAgeMs = initialAge(response, requestTimeMs, responseTimeMs);
  const freshMs = d.noCache ? 0 : Math.max(lifetime - initialAgeMs, 0);
  let keepMs = staleWindowMs(rules, d);
  if (hasValidator) keepMs = Math.max(keepMs, rules.revalidationWindow * 1000);
  if (freshMs === 0 && keepMs === 0) return notStored("no-explicit-freshness");
  return { stored: true, freshMs, initialAgeMs, keepStaleMs: keepMs, vary };
}

/** The directives that govern larder (spec/HTTP.md §1.3), and whether Expires counts. */
export function governing(rules: Rules, responseHeaders: HeaderLines): [Directives, boolean] {
  const response = lowercase(responseHeaders);
  for (const targeted of rules.targetedFields) {
    const found = parseTargeted(values(response, lower(targeted)));
    if (found !== undefined) return [found, false];
  }
  if (rules.surrogateControl) {
    const surrogate = parseSurrogateControl(values(response, "surrogate-control"));
    if (surrogate !== undefined) return [surrogate, false];
  }
  return [parseCacheControl(values(response, "cache-control")), true];
}

const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** The lowercase names a response varies on (sorted by byte value, unique), or undefined for `Vary: *`. */
export function varyNames(responseHeaders: HeaderLines): string[] | undefined {
  const names = new Set<string>();
  for (const line of values(lowercase(responseHeaders), "vary")) {
    for (const raw of line.split(",")) {
      const name = trim(raw);
      if (name === "*") return undefined;
      if (name !== "") names.add(lower(name));
    }
  }
  return [...names].sort(byteOrder);
}

/** No Content-Encoding, or exactly one line naming a coding larder decodes (any case). */
export function codingIsDecodable(responseHeaders: HeaderLines): boolean {
  const codings = values(lowercase(responseHeaders), "content-encoding");
  if (codings.length === 0) return true;
  return codings.length === 1 && (CONTENT_ENCODINGS as readonly string[]).includes(lower(trim(codings[0] as string)));
}

function firstDate(response: HeaderLines, name: string, nowMs: number): number | undefined {
  const lines = values(response, name);
  return lines.length > 0 ? parseHttpDate(lines[0] as string, nowMs) : undefined;
}

function dateOr(response: HeaderLines, responseTimeMs: number): number {
  return firstDate(response, "date", responseTimeMs) ?? responseTimeMs;
}

function lifetimeMs(
  rules: Rules,
  status: number,
  response: HeaderLines,
  d: Directives,
  useExpires: boolean,
  nowMs: number,
): number | undefined {
  if (d.sMaxage !== undefined) return d.sMaxage * 1000;
  if (d.maxAge !== undefined) return d.maxAge * 1000;
  const expires = values(response, "expires");
  if (useExpires && expires.length > 0) {
    const at = expires.length === 1 ? parseHttpDate(expires[0] as string, nowMs) : undefined;
    if (at === undefined) return 0;
    return Math.min(Math.max(at - dateOr(response, nowMs), 0), MAX_DELTA_SECONDS * 1000);
  }
  if (rules.heuristicMax > 0 && (HEURISTICALLY_CACHEABLE.has(status) || d.public)) {
    const lastModified = firstDate(response, "last-modified", nowMs);
    if (lastModified !== undefined) {
      const age = Math.max(dateOr(response, nowMs) - lastModified, 0);
      return Math.min(Math.floor(age / 10), rules.heuristicMax * 1000);
    }
  }
  return undefined;
}

function staleWindowMs(rules: Rules, d: Directives): number {
  if (d.mustRevalidate || d.proxyRevalidate || d.noCache || d.sMaxage !== undefined) return 0;
  const swr = d.staleWhileRevalidate ?? rules.staleWhileRevalidate;
  const sie = d.staleIfError ?? rules.staleIfError;
  return Math.max(swr, sie) * 1000;
}

function initialAge(response: HeaderLines, requestTimeMs: number, responseTimeMs: number): number {
  const date = firstDate(response, "date", responseTimeMs);
  const apparent = date !== undefined ? Math.max(responseTimeMs - date, 0) : 0;
  const delay = Math.max(responseTimeMs - requestTimeMs, 0);
  const ages = values(response, "age");
  const age = ages.length > 0 ? deltaSeconds(trim((ages[0] as string).split(",")[0] as string)) : undefined;
  return Math.max(apparent, (age ?? 0) * 1000 + delay);
}
