// Which site a page an app writes for the front belongs to (issue 32, finding 7; spec/FORMAT.md §5.3 keys). A page
// cache keys on the request's authority, and an app is often reachable without the front (health checks, internal
// callers, a second load balancer), so whoever sends it a request chooses the Host, X-Forwarded-Host and the target:
// `Host: victim.example/admin`, `Host: evil@victim.example` or `X-Forwarded-Host: victim.example` would write a page
// the front then serves to victim.example. So, as `larder serve` does:
// - the authority is the configured `site` when there is one, else the request's Host; a Host that is not a plain
//   `host[:port]` (the front's own rule: no userinfo, path, query, fragment, escape, space, control or sub-delimiter,
//   a port of at most five digits up to 65535, a well-formed bracketed IPv6) names no page, and with a `site`, a Host
//   that is not the site (lowercase, default port removed) names none either;
// - X-Forwarded-Host, X-Forwarded-Proto and Forwarded are read only from a peer in `trustedProxies` (addresses and
//   CIDRs; none by default), whose claims must agree and be plain too;
// - a request with an absolute-form target (`GET http://victim.example/ HTTP/1.1`) names no page, whatever its Host;
// - the scheme is the cache's `scheme` option, else a trusted proxy's, else the connection's.
// A request that names no page this way is not stored (reason `host`).

import net from "node:net";
import { utf8OrUndefined } from "./bytes.js";
import type { RequestHeaders } from "./keys.js";

/** `host[:port]`: a DNS-style name (letters, digits, `-`, `.`, `_`, `~`), an IPv4 address or a bracketed IPv6 literal,
 * then an optional port of at most five digits up to 65535; what `larder serve` accepts (crates/proxy request.rs). */
export function validAuthority(text: string): boolean {
  let port: string | undefined;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close === -1) return false;
    const literal = text.slice(1, close);
    if (literal === "" || !/^[0-9A-Fa-f:.]+$/.test(literal)) return false;
    const after = text.slice(close + 1);
    if (after === "") return true;
    if (!after.startsWith(":")) return false;
    port = after.slice(1);
  } else {
    const colon = text.lastIndexOf(":");
    const host = colon === -1 ? text : text.slice(0, colon);
    port = colon === -1 ? undefined : text.slice(colon + 1);
    if (!/^[A-Za-z0-9._~-]+$/.test(host)) return false;
  }
  // `host:` (a colon and no port) is not plain: only the absence of the colon leaves the port out.
  return port === undefined || (/^[0-9]{1,5}$/.test(port) && Number(port) <= 65535);
}

/** A plain authority as keys name it (spec/FORMAT.md §5.3 step 3): ASCII lowercase, without the scheme's default
 * port. */
export function normalAuthority(scheme: string, authority: string): string {
  const a = authority.toLowerCase();
  const port = scheme === "http" ? ":80" : scheme === "https" ? ":443" : undefined;
  return port !== undefined && a.endsWith(port) ? a.slice(0, -port.length) : a;
}

/** Peers whose forwarding fields are believed: addresses and CIDRs, IPv4-mapped IPv6 peers counting as IPv4. */
export class TrustedProxies {
  private readonly list = new net.BlockList();
  readonly empty: boolean;

  /** Throws RangeError for an entry that is not an address or a CIDR. */
  constructor(entries: readonly string[]) {
    this.empty = entries.length === 0;
    for (const entry of entries) {
      const [address, bits, extra] = entry.trim().split("/");
      const family = net.isIP(address ?? "");
      const max = family === 4 ? 32 : 128;
      if (family === 0 || extra !== undefined || (bits !== undefined && !/^[0-9]{1,3}$/.test(bits)))
        throw new RangeError(`trusted proxy ${JSON.stringify(entry)} is not an address or a CIDR`);
      const prefix = bits === undefined ? max : Number(bits);
      if (prefix > max) throw new RangeError(`trusted proxy ${JSON.stringify(entry)}: a prefix of at most ${max}`);
      this.list.addSubnet(address as string, prefix, family === 4 ? "ipv4" : "ipv6");
    }
  }

  has(peer: string | undefined): boolean {
    if (this.empty || peer === undefined) return false;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(peer);
    const address = mapped?.[1] ?? peer;
    const family = net.isIP(address);
    if (family === 0) return false;
    return this.list.check(address, family === 4 ? "ipv4" : "ipv6");
  }
}

/** A header's first line as text (undefined when absent or not ASCII: not ASCII is `false`). */
function firstLine(headers: RequestHeaders, name: string): string | undefined | false {
  for (const [n, v] of headers) {
    if (n.toLowerCase() !== name) continue;
    const text = typeof v === "string" ? v : utf8OrUndefined(v);
    return text !== undefined && /^[\x20-\x7e\t]*$/.test(text) ? text : false;
  }
  return undefined;
}

/** What a trusted proxy claims of the original request: X-Forwarded-Proto / X-Forwarded-Host (first element) and
 * the first element of Forwarded, which must agree where both speak; undefined when they do not, or are not ASCII,
 * or the protocol is neither http nor https (as the front's forwarding.rs reads them). */
export function forwardedClaims(headers: RequestHeaders): { proto?: string; host?: string } | undefined {
  const first = (name: string): string | undefined | false => {
    const line = firstLine(headers, name);
    if (line === undefined || line === false) return line;
    const element = (line.split(",")[0] ?? "").trim();
    return element === "" ? undefined : element;
  };
  const proto = first("x-forwarded-proto");
  const host = first("x-forwarded-host");
  if (proto === false || host === false) return undefined;
  const claims: { proto?: string; host?: string } = {};
  if (proto !== undefined) claims.proto = proto;
  if (host !== undefined) claims.host = host;
  const forwarded = firstLine(headers, "forwarded");
  if (forwarded === false) return undefined;
  if (forwarded !== undefined) {
    for (const pair of (forwarded.split(",")[0] ?? "").split(";")) {
      const eq = pair.indexOf("=");
      if (eq === -1) continue;
      const name = pair.slice(0, eq).trim().toLowerCase();
      const value = pair
        .slice(eq + 1)
        .trim()
        .replace(/^"+|"+$/g, "");
      if (name !== "proto" && name !== "host") continue;
      const existing = claims[name];
      if (existing !== undefined && existing.toLowerCase() !== value.toLowerCase()) return undefined;
      claims[name] = value;
    }
  }
  if (claims.proto !== undefined) {
    claims.proto = claims.proto.toLowerCase();
    if (claims.proto !== "http" && claims.proto !== "https") return undefined;
  }
  return claims;
}

/** The request's origin as the page cache keys it. */
export interface PageOrigin {
  scheme: string;
  authority: string;
  /** Path and query (origin-form). */
  target: string;
}

export interface OriginPolicy {
  /** The key's scheme whatever the request says (PageCacheOptions.scheme). */
  scheme: string | undefined;
  /** The configured site's authority, already checked. */
  site: string | undefined;
  trusted: TrustedProxies;
}

/** The origin a request's page is keyed on, or undefined when the request names no page the cache may write (see
 * the top of this file). */
export function pageOrigin(
  request: { scheme: string; authority: string; target: string; headers: RequestHeaders; peer?: string | undefined },
  policy: OriginPolicy,
): PageOrigin | undefined {
  let scheme = request.scheme.toLowerCase() === "https" ? "https" : "http";
  let host = request.authority;
  if (policy.trusted.has(request.peer)) {
    const claims = forwardedClaims(request.headers);
    if (claims === undefined) return undefined;
    if (claims.proto !== undefined) scheme = claims.proto;
    if (claims.host !== undefined) host = claims.host;
  }
  if (policy.scheme !== undefined) scheme = policy.scheme;
  if (!validAuthority(host)) return undefined;
  const authority = normalAuthority(scheme, host);
  if (policy.site !== undefined && normalAuthority(scheme, policy.site) !== authority) return undefined;
  // Only an origin-form target (`/p?q`) names a page. An absolute-form one (`GET http://a.example/x HTTP/1.1`) is
  // never stored, whatever its Host: RFC 9112 §3.2.2 has the app use the target's authority, which a direct sender
  // chooses, and ignore the Host (spec/HTTP.md §2 step 2); `*` and authority-form targets name no page either.
  const target = request.target;
  if (!target.startsWith("/")) return undefined;
  return { scheme, authority, target };
}
