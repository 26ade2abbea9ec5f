// Page caching as a Fastify plugin: `app.register(larderFastify, { pages })` hands every GET response to a
// PageCache once Fastify has serialized it (onSend), which stores it for larder's front when the front's rules
// would, under the key the front looks up (see pages.ts). The response is not changed or delayed: the store write
// runs after it is sent, and a failed write is only counted (pages.stats). No import of fastify: the plugin is a
// plain function with the signature Fastify calls, marked to skip encapsulation (what fastify-plugin does).

import type { IncomingMessage } from "node:http";
import { pageRequest } from "./express.js";
import type { PageCache } from "./pages.js";

interface FastifyLikeRequest {
  raw: IncomingMessage;
  method: string;
}
interface FastifyLikeReply {
  statusCode: number;
  getHeaders(): Record<string, unknown>;
}
interface FastifyLike {
  addHook(
    name: "onRequest",
    hook: (request: FastifyLikeRequest, reply: FastifyLikeReply, done: () => void) => void,
  ): unknown;
  addHook(
    name: "onSend",
    hook: (
      request: FastifyLikeRequest,
      reply: FastifyLikeReply,
      payload: unknown,
      done: (err: null, payload: unknown) => void,
    ) => void,
  ): unknown;
}

export interface LarderFastifyOptions {
  pages: PageCache;
  onSaved?: (key: string | undefined) => void;
}

const started = new WeakMap<object, number>();

function payloadBytes(payload: unknown): Buffer | undefined {
  if (typeof payload === "string") return Buffer.from(payload, "utf8");
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  if (payload === null || payload === undefined) return Buffer.alloc(0);
  return undefined; // a stream: not buffered here (stored pages are whole bodies)
}

/** The plugin: `await app.register(larderFastify, { pages })`. */
export function larderFastify(app: FastifyLike, options: LarderFastifyOptions, done: (err?: Error) => void): void {
  const { pages } = options;
  app.addHook("onRequest", (request, _reply, next) => {
    started.set(request, Date.now());
    next();
  });
  app.addHook("onSend", (request, reply, payload, next) => {
    next(null, payload);
    if (request.method !== "GET") return;
    const body = payloadBytes(payload);
    if (body === undefined) return;
    const headers: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.push([name, String(v)]);
    }
    pages.save(pageRequest(request.raw), reply.statusCode, headers, body, started.get(request)).then(
      (key) => options.onSaved?.(key),
      () => options.onSaved?.(undefined),
    );
  });
  done();
}
// Fastify's own marker for a plugin whose hooks apply to the whole app (what fastify-plugin sets).
(larderFastify as unknown as Record<symbol, boolean>)[Symbol.for("skip-override")] = true;
