// Page caching as Express/Connect middleware: `app.use(larderPages(pages))` watches each GET response the app sends
// and, once it has ended, hands it to a PageCache, which stores it for larder's front when the front's rules would
// (spec/HTTP.md §1) under the key the front looks up. The response itself is untouched and not delayed: the store
// write runs after it has gone out, and a failed write is only counted (pages.stats).

import type { IncomingMessage, ServerResponse } from "node:http";
import type { PageCache, PageRequest } from "./pages.js";

type Next = (error?: unknown) => void;

/** The parts of a request as a Node server hands them over: header lines as `rawHeaders` (name, value, name,
 * value…; values are the bytes received read as latin-1), the target as sent (`req.url`), the scheme of the
 * connection and the peer's address (`req.socket.remoteAddress`). */
export interface ReceivedRequest {
  method: string;
  scheme: "http" | "https";
  target: string;
  rawHeaders: readonly string[];
  peer: string | undefined;
}

/** A received request as a PageRequest: its one Host line is the authority (none, or several, is no authority);
 * forwarding fields are not read here but by the PageCache, from its trusted proxies only (page_origin.ts). */
export function pageRequestOf(r: ReceivedRequest): PageRequest {
  // Node reads header bytes as latin-1: back to the bytes received, which variant keys read as UTF-8 (§5.4).
  const headers: Array<[string, Uint8Array]> = [];
  const hosts: string[] = [];
  for (let i = 0; i + 1 < r.rawHeaders.length; i += 2) {
    const name = r.rawHeaders[i] as string;
    const value = r.rawHeaders[i + 1] as string;
    headers.push([name, new Uint8Array(Buffer.from(value, "latin1"))]);
    if (name.toLowerCase() === "host") hosts.push(value);
  }
  return {
    method: r.method,
    scheme: r.scheme,
    authority: hosts.length === 1 ? (hosts[0] as string) : "",
    target: r.target,
    headers,
    peer: r.peer,
  };
}

/** The request as the app received it, as a PageRequest (pageRequestOf): the scheme of its connection, its Host,
 * the target as sent and the peer's address. */
export function pageRequest(req: IncomingMessage): PageRequest {
  return pageRequestOf({
    method: req.method ?? "GET",
    scheme: "encrypted" in req.socket ? "https" : "http",
    target: req.url ?? "/",
    rawHeaders: req.rawHeaders,
    peer: req.socket.remoteAddress,
  });
}

export interface MiddlewareOptions {
  /** Called with the key a page was stored under (or undefined when it was not), after the write. */
  onSaved?: (key: string | undefined, req: IncomingMessage) => void;
}

/** Connect-style middleware (Express, Connect, plain node:http with a tiny adapter). */
export function larderPages(pages: PageCache, options: MiddlewareOptions = {}) {
  return (req: IncomingMessage, res: ServerResponse, next: Next): void => {
    if (req.method !== "GET") {
      next();
      return;
    }
    const requestTime = Date.now();
    const request = pageRequest(req);
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    const keep = (chunk: unknown, encoding?: unknown): void => {
      if (chunk === undefined || chunk === null || typeof chunk === "function" || tooLarge) return;
      const buf =
        typeof chunk === "string"
          ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
          : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (size > pages.maxBody) {
        tooLarge = true;
        chunks.length = 0;
      } else chunks.push(buf);
    };
    // Headers given to writeHead are set one by one first, so getHeaders() sees them when the response ends.
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = ((status: number, ...rest: unknown[]) => {
      const headers = typeof rest[0] === "string" ? rest[1] : rest[0];
      const reason = typeof rest[0] === "string" ? [rest[0]] : [];
      if (Array.isArray(headers)) {
        const flat = Array.isArray(headers[0]) ? (headers as Array<[string, string]>).flat() : (headers as string[]);
        for (let i = 0; i + 1 < flat.length; i += 2) res.appendHeader(flat[i] as string, flat[i + 1] as string);
      } else if (headers !== undefined && headers !== null) {
        for (const [name, value] of Object.entries(headers as Record<string, string | string[]>))
          res.setHeader(name, value);
      }
      return writeHead(status, ...reason);
    }) as typeof res.writeHead;
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      keep(chunk, rest[0]);
      return write(chunk, ...rest);
    }) as typeof res.write;
    res.end = ((chunk?: unknown, ...rest: unknown[]) => {
      keep(chunk, rest[0]);
      const result = end(chunk, ...rest);
      if (!tooLarge) {
        const headers: Array<[string, string]> = [];
        for (const [name, value] of Object.entries(res.getHeaders())) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) headers.push([name, String(v)]);
        }
        pages.save(request, res.statusCode, headers, Buffer.concat(chunks), requestTime).then(
          (key) => options.onSaved?.(key, req),
          () => options.onSaved?.(undefined, req),
        );
      }
      return result;
    }) as typeof res.end;
    next();
  };
}
