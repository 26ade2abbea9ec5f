// Store URLs (spec/STORES.md §1): `scheme://[user[:password]@]host[:port][,host[:port]…][/path][?options]`, one
// string naming a store the same way in every language. Each backend takes the options it knows; any option left
// over is an error naming it and the known ones, so a typo never silently falls back to a default.

import { UrlError } from "./errors.js";

const SIZE_SHIFTS: Record<string, number> = { "": 0, K: 10, M: 20, G: 30, T: 40 };
const DURATION_UNITS: Record<string, number> = { "": 1, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `1048576`, `512K`, `256M`, `1.5G`, `2GiB` (binary multiples; case and a trailing B/iB do not matter). */
export function parseSize(text: string): number {
  const trimmed = text.trim();
  if (trimmed.startsWith("-")) throw new RangeError(`${text}: a size cannot be negative`);
  const m = /^([0-9]*)(?:\.([0-9]*))?\s*([A-Za-z]*)$/.exec(trimmed);
  let suffix = (m?.[3] ?? "").toUpperCase();
  if (suffix.endsWith("IB")) suffix = suffix.slice(0, -2);
  else if (suffix.endsWith("B")) suffix = suffix.slice(0, -1);
  const shift = SIZE_SHIFTS[suffix];
  if (m === null || shift === undefined || (m[1] === "" && !m[2]))
    throw new RangeError(`${text} is not a size (examples: 1048576, 512K, 256M, 1.5G)`);
  const multiplier = 2n ** BigInt(shift);
  let size = BigInt(m[1] || "0") * multiplier;
  const fraction = (m[2] ?? "").slice(0, 18);
  if (fraction) size += (BigInt(fraction) * multiplier) / 10n ** BigInt(fraction.length);
  if (size > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`${text} is too large`);
  return Number(size);
}

/** ms from `250`, `250ms`, `2s`, `1m`, `1h` (1 to 12 digits, at most one unit); nothing else. */
export function parseDurationMs(text: string): number {
  const m = /^([0-9]{1,12})([a-z]*)$/.exec(text);
  const unit = m === null ? undefined : DURATION_UNITS[m[2] as string];
  if (m === null || unit === undefined) throw new RangeError("a number with ms, s, m or h");
  return Number(m[1]) * unit;
}

export interface HostPort {
  /** Without brackets for IPv6. */
  host: string;
  port: number | undefined;
  /** As written in the URL (an IPv6 address keeps its brackets): the ring's point names use it. */
  written: string;
}

export function address(h: HostPort, defaultPort: number): string {
  const port = h.port ?? defaultPort;
  return h.host.includes(":") ? `[${h.host}]:${port}` : `${h.host}:${port}`;
}

/** The URL with any password replaced by `***`. */
export function redact(url: string): string {
  const sep = url.indexOf("://");
  if (sep === -1) return url;
  const rest = url.slice(sep + 3);
  let end = rest.length;
  for (const stop of "/?") {
    const at = rest.indexOf(stop);
    if (at !== -1) end = Math.min(end, at);
  }
  const authority = rest.slice(0, end);
  const at = authority.lastIndexOf("@");
  if (at === -1) return url;
  const userinfo = authority.slice(0, at);
  if (!userinfo.includes(":")) return url;
  return `${url.slice(0, sep)}://${userinfo.slice(0, userinfo.indexOf(":"))}:***@${authority.slice(at + 1)}${rest.slice(end)}`;
}

function decode(shown: string, text: string): string {
  try {
    const bytes = Buffer.from(
      text.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16))),
      "latin1",
    );
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new UrlError(shown, `${JSON.stringify(text)} is not UTF-8 once decoded`);
  }
}

function parseHost(shown: string, part: string): HostPort {
  const invalid = new UrlError(shown, `${JSON.stringify(part)} is not host[:port]`);
  let host: string;
  let portText: string | undefined;
  if (part.startsWith("[")) {
    const close = part.indexOf("]");
    if (close === -1) throw invalid;
    host = part.slice(1, close);
    const after = part.slice(close + 1);
    if (after && !after.startsWith(":")) throw invalid;
    portText = after ? after.slice(1) : undefined;
  } else if (part.includes(":")) {
    const colon = part.lastIndexOf(":");
    host = part.slice(0, colon);
    portText = part.slice(colon + 1);
    if (host.includes(":"))
      throw new UrlError(shown, `${JSON.stringify(part)}: write an IPv6 address in brackets, [::1]:11211`);
  } else host = part;
  if (host === "" || /[\s/?#@]/.test(host)) throw invalid;
  let port: number | undefined;
  if (portText !== undefined) {
    if (!/^[0-9]+$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535)
      throw new UrlError(shown, `${JSON.stringify(part)}: port must be 1-65535`);
    port = Number(portText);
  }
  const written = part.startsWith("[") ? part.slice(0, part.indexOf("]") + 1) : host;
  return { host, port, written };
}

/** A parsed store URL: take the options a backend knows with take*, then call finish(). */
export class StoreUrl {
  private readonly known = new Set<string>();
  private constructor(
    readonly scheme: string,
    readonly username: string | undefined,
    readonly password: string | undefined,
    readonly hosts: HostPort[],
    readonly path: string,
    readonly shown: string,
    private readonly options: Array<[string, string]>,
  ) {}

  static parse(url: string): StoreUrl {
    const shown = redact(url);
    const sep = url.indexOf("://");
    if (sep === -1)
      throw new UrlError(shown, "not a store URL: expected scheme://… (for example memcached://127.0.0.1:11211)");
    const scheme = url.slice(0, sep).toLowerCase();
    if (!/^[a-z0-9+]+$/.test(scheme)) throw new UrlError(shown, `${JSON.stringify(scheme)} is not a URL scheme`);
    let rest = url.slice(sep + 3);
    const q = rest.indexOf("?");
    const query = q === -1 ? "" : rest.slice(q + 1);
    rest = q === -1 ? rest : rest.slice(0, q);
    if (rest.includes("#") || query.includes("#")) throw new UrlError(shown, "a store URL has no fragment (#)");
    const slash = rest.indexOf("/");
    const authority = slash === -1 ? rest : rest.slice(0, slash);
    const path = slash === -1 ? "" : rest.slice(slash);
    const at = authority.lastIndexOf("@");
    const hostList = at === -1 ? authority : authority.slice(at + 1);
    let username: string | undefined;
    let password: string | undefined;
    if (at !== -1) {
      const userinfo = authority.slice(0, at);
      const colon = userinfo.indexOf(":");
      username = decode(shown, colon === -1 ? userinfo : userinfo.slice(0, colon)) || undefined;
      password = colon === -1 ? undefined : decode(shown, userinfo.slice(colon + 1));
    }
    const hosts = hostList ? hostList.split(",").map((p) => parseHost(shown, p)) : [];
    const options: Array<[string, string]> = [];
    for (const pair of query.split("&")) {
      if (!pair) continue;
      const eq = pair.indexOf("=");
      const name = decode(shown, eq === -1 ? pair : pair.slice(0, eq));
      const value = decode(shown, eq === -1 ? "" : pair.slice(eq + 1));
      if (options.some(([n]) => n === name)) throw new UrlError(shown, `option ${JSON.stringify(name)} is given twice`);
      options.push([name, value]);
    }
    return new StoreUrl(scheme, username, password, hosts, decode(shown, path), shown, options);
  }

  error(message: string): UrlError {
    return new UrlError(this.shown, message);
  }

  take(name: string): string | undefined {
    this.known.add(name);
    const i = this.options.findIndex(([n]) => n === name);
    if (i === -1) return undefined;
    const [[, value]] = this.options.splice(i, 1) as [[string, string]];
    return value;
  }

  takeDurationMs(name: string, defaultMs: number): number {
    const text = this.take(name);
    if (text === undefined) return defaultMs;
    try {
      return parseDurationMs(text);
    } catch (e) {
      throw this.error(`option ${name}=${JSON.stringify(text)} is not a duration (${(e as Error).message})`);
    }
  }

  takeSize(name: string, defaultSize: number): number {
    const text = this.take(name);
    if (text === undefined) return defaultSize;
    try {
      return parseSize(text);
    } catch (e) {
      throw this.error(`option ${name}: ${(e as Error).message}`);
    }
  }

  takeNumber(name: string, defaultValue: number, low: number, high: number): number {
    const text = this.take(name);
    if (text === undefined) return defaultValue;
    if (/^[0-9]+$/.test(text) && Number(text) >= low && Number(text) <= high) return Number(text);
    throw this.error(`option ${name}=${JSON.stringify(text)} must be a whole number from ${low} to ${high}`);
  }

  takeBool(name: string, defaultValue: boolean): boolean {
    const text = this.take(name);
    if (text === undefined) return defaultValue;
    if (["true", "1", "yes"].includes(text)) return true;
    if (["false", "0", "no"].includes(text)) return false;
    throw this.error(`option ${name}=${JSON.stringify(text)} must be true or false`);
  }

  /** Refuses options no backend took, naming the known ones. */
  finish(): void {
    if (this.options.length === 0) return;
    const unknown = this.options.map(([n]) => n);
    const known = [...this.known].sort().join(", ") || "none";
    throw this.error(
      `unknown option${unknown.length === 1 ? "" : "s"} ${unknown.join(", ")} for ${this.scheme}:// (known: ${known})`,
    );
  }

  noHosts(): void {
    if (this.hosts.length > 0 || this.username !== undefined)
      throw this.error(`${this.scheme}:// takes a path, not a host (write ${this.scheme}:///path)`);
  }

  requireHosts(): HostPort[] {
    if (this.hosts.length === 0) throw this.error(`${this.scheme}:// needs at least one host`);
    return this.hosts;
  }
}
