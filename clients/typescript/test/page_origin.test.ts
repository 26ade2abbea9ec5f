// Issue 32, finding 7 (spec/HTTP.md §2): a request that reaches a Node app directly, not through larder's front,
// with a hostile Host, forwarding field or absolute-form target must not write a page the front then serves for
// another site. Each request here is sent as raw bytes from loopback to a real server (node:http with the
// Express/Connect middleware, and a listening Fastify app with the plugin), with the page cache's `site` and
// `trustedProxies` options: it is keyed on the site the rules allow, or not stored (reason `host`). On the code
// before the fix (express.ts keyed the raw Host and believed X-Forwarded-Proto from anyone), `X-Forwarded-Proto:
// https` from anyone keyed https, `Host: evil@victim.example` keyed victim.example, `Host: victim.example/admin` and
// `GET http://evil.example/…` wrote pages, and no proxy could be trusted. An absolute-form target is never stored,
// whatever its Host (spec/HTTP.md §2 step 2: RFC 9112 §3.2.2 has the app ignore that Host).

import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { describe, test } from "node:test";
import Fastify from "fastify";
import { larderPages } from "../src/express.js";
import { larderFastify } from "../src/fastify.js";
import { forwardedClaims, normalAuthority, TrustedProxies, validAuthority } from "../src/page_origin.js";
import { frontHeaders, PageCache, type PageCacheOptions, type PageRequest } from "../src/pages.js";
import { MemoryStore } from "../src/stores/memory.js";

// ------------------------------------------------------------------------------------------ the rules alone

// The hostile Hosts and their relatives: none is a plain authority.
const NOT_PLAIN = [
  "victim.example/admin",
  "evil@victim.example",
  "evil.example/x@victim.example",
  "victim.example:99999",
  "victim.example:65536",
  "victim.example:123456",
  "victim.example:",
  "victim.example:+80",
  "victim.example:-1",
  "victim.example%2fadmin",
  "victim.example\\admin",
  "victim.example?x",
  "victim.example#x",
  "victim .example",
  " victim.example",
  "victim.example\t",
  "victim.example,evil.example",
  "victim.example;evil",
  "[::1",
  "[::1]x",
  "[::1]:",
  "[]",
  "[::1]:99999",
  "[evil.example]",
  "::1",
  "",
  "vïctim.example",
  "v\u00c3\u00afctim.example", // the UTF-8 of ï as Node hands header bytes over (latin-1)
  "victim.example\u0000",
];
const PLAIN = [
  "victim.example",
  "Victim.Example:8080",
  "localhost",
  "127.0.0.1:3000",
  "[::1]",
  "[::1]:8443",
  "[::ffff:127.0.0.1]:80",
  "a_b~c-d.example:65535",
  "victim.example:0",
];

const page = (o: PageCacheOptions = {}) => new PageCache(new MemoryStore(), o);
const req = (authority: string, extra: Partial<PageRequest> = {}): PageRequest => ({
  method: "GET",
  scheme: "http",
  authority,
  target: "/p",
  headers: [["Host", authority]],
  peer: "203.0.113.9",
  ...extra,
});

describe("which site a page is for (spec/HTTP.md §2), the rules alone", () => {
  test("only a plain host[:port] is an authority", () => {
    for (const host of NOT_PLAIN) {
      assert.equal(validAuthority(host), false, JSON.stringify(host));
      assert.equal(page().key(req(host)), undefined, JSON.stringify(host));
    }
    for (const host of PLAIN) assert.equal(validAuthority(host), true, JSON.stringify(host));
    assert.equal(page().key(req("Shop.Example:80")), "GET:http://shop.example/p");
    assert.equal(page().key(req("[::1]:80")), "GET:http://[::1]/p");
    assert.equal(normalAuthority("https", "A.example:443"), "a.example");
    assert.equal(normalAuthority("http", "a.example:443"), "a.example:443");
  });

  test("the spec's examples", () => {
    const untrusted = page();
    assert.equal(untrusted.key(req("shop.example")), "GET:http://shop.example/p");
    const xfh: Partial<PageRequest> = {
      headers: [
        ["Host", "victim.example"],
        ["X-Forwarded-Host", "evil.example"],
      ],
    };
    assert.equal(untrusted.key(req("victim.example", xfh)), "GET:http://victim.example/p");
    const trusted = page({ trustedProxies: ["203.0.113.0/24"] });
    assert.equal(trusted.key(req("victim.example", xfh)), "GET:http://evil.example/p");
    const site = page({ site: "shop.example" });
    assert.equal(site.key(req("other.example")), undefined);
    assert.equal(site.key(req("SHOP.example:80")), "GET:http://shop.example/p");
    assert.equal(untrusted.key(req("victim.example", { target: "http://evil.example/" })), undefined);
    // an absolute-form target is never stored, even naming the Host's own authority (RFC 9112 §3.2.2)
    assert.equal(untrusted.key(req("victim.example", { target: "http://victim.example/x?b=1&a=2" })), undefined);
    assert.equal(untrusted.key(req("victim.example", { target: "http://evil@victim.example/" })), undefined);
    assert.equal(untrusted.key(req("victim.example", { target: "*" })), undefined);
    assert.equal(untrusted.key(req("")), undefined, "no Host");
  });

  test("the scheme: the option, else a trusted proxy's, else the connection's", () => {
    const proto = { headers: [["X-Forwarded-Proto", "https"] as [string, string]] };
    assert.equal(page().key(req("a.example", proto)), "GET:http://a.example/p");
    assert.equal(page().key(req("a.example", { scheme: "https" })), "GET:https://a.example/p");
    const trusted = page({ trustedProxies: ["203.0.113.9"] });
    assert.equal(trusted.key(req("a.example:443", proto)), "GET:https://a.example/p");
    assert.equal(
      page({ trustedProxies: ["203.0.113.9"], scheme: "http" }).key(req("a.example", proto)),
      "GET:http://a.example/p",
    );
  });

  test("a trusted proxy's claims are read as the front reads them, and must agree", () => {
    const h = (...lines: Array<[string, string]>) => lines;
    assert.deepEqual(
      forwardedClaims(h(["X-Forwarded-Host", "a.example, b.example"], ["X-Forwarded-Proto", "HTTPS, http"])),
      {
        host: "a.example",
        proto: "https",
      },
    );
    assert.deepEqual(
      forwardedClaims(h(["Forwarded", 'for=1.2.3.4;host="a.example:8080";proto=http, host=b.example'])),
      {
        host: "a.example:8080",
        proto: "http",
      },
    );
    assert.equal(forwardedClaims(h(["X-Forwarded-Host", "a.example"], ["Forwarded", "host=b.example"])), undefined);
    assert.equal(forwardedClaims(h(["X-Forwarded-Proto", "gopher"])), undefined);
    assert.equal(forwardedClaims(h(["X-Forwarded-Host", "a.\u00e9xample"])), undefined);
    const trusted = page({ trustedProxies: ["203.0.113.9"] });
    for (const headers of [
      h(["X-Forwarded-Host", "a.example"], ["Forwarded", "host=b.example"]),
      h(["X-Forwarded-Proto", "ftp"]),
      h(["X-Forwarded-Host", "victim.example/admin"]),
      h(["X-Forwarded-Host", "evil@victim.example"]),
      h(["Forwarded", "host=victim.example:99999"]),
    ])
      assert.equal(trusted.key(req("victim.example", { headers })), undefined, JSON.stringify(headers));
  });

  test("trusted proxies: addresses and CIDRs, IPv4-mapped peers as IPv4; a bad entry or site refuses to start", () => {
    const t = new TrustedProxies(["10.0.0.0/8", "192.0.2.7", " fd00::/8 ", "10.1.2.3/32"]);
    assert.ok(t.has("10.200.0.1"));
    assert.ok(t.has("::ffff:10.0.0.1"));
    assert.ok(t.has("192.0.2.7"));
    assert.ok(!t.has("192.0.2.8"));
    assert.ok(t.has("fd12::1"));
    assert.ok(!t.has("fe80::1"));
    assert.ok(!t.has(undefined));
    assert.ok(!t.has("not an address"));
    assert.ok(!new TrustedProxies([]).has("127.0.0.1"));
    for (const bad of ["proxy.example", "10.0.0.0/33", "fd00::/129", "10.0.0.0/8/8", "10.0.0.0/x", ""])
      assert.throws(() => new TrustedProxies([bad]), RangeError, bad);
    for (const bad of ["shop.example/", "evil@shop.example", "shop.example:", "shop.example:99999", ""])
      assert.throws(() => page({ site: bad }), RangeError, bad);
  });
});

// ------------------------------------------------------------------------------------------ real servers

/** Sends `head` (the request line and header lines, CRLF-separated, without the final empty line) as raw bytes and
 * reads the whole answer (the server closes: `Connection: close`); the status code. */
function raw(port: number, head: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error("timeout")));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(Buffer.concat(chunks).toString("latin1"));
      resolve(status === null ? 0 : Number(status[1]));
    });
    socket.end(Buffer.from(`${head}\r\nConnection: close\r\n\r\n`, "latin1"));
  });
}

interface Served {
  port: number;
  pages: PageCache;
  saved: Array<string | undefined>;
  close(): Promise<void>;
}

/** node:http with the Express/Connect middleware, as an Express app runs it (app.use(larderPages(pages))). */
async function connectApp(options: PageCacheOptions, listen = "127.0.0.1"): Promise<Served> {
  const pages = page(options);
  const saved: Array<string | undefined> = [];
  const middleware = larderPages(pages, { onSaved: (key) => saved.push(key) });
  const server = http.createServer((request, response) =>
    middleware(request, response, () => {
      response.writeHead(200, { "Content-Type": "text/plain", ...Object.fromEntries(frontHeaders(60)) });
      response.end(`page for ${request.headers.host}`);
    }),
  );
  await new Promise<void>((r) => server.listen(0, listen, r));
  const port = (server.address() as net.AddressInfo).port;
  return { port, pages, saved, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A listening Fastify app with the plugin. */
async function fastifyApp(options: PageCacheOptions): Promise<Served> {
  const pages = page(options);
  const saved: Array<string | undefined> = [];
  const app = Fastify();
  await app.register(larderFastify, { pages, onSaved: (key) => saved.push(key) });
  app.get("/*", async (request, reply) => {
    for (const [name, value] of frontHeaders(60)) reply.header(name, value);
    reply.type("text/plain");
    return `page for ${request.raw.headers.host}`;
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  const port = (app.server.address() as net.AddressInfo).port;
  return { port, pages, saved, close: () => app.close() };
}

interface Case {
  /** The request line's target and the header lines after it. */
  target: string;
  lines: string[];
  /** The key the page is stored under, or undefined: not stored, reason `host`. */
  key: string | undefined;
  version?: "1.0";
}

/** Sends each case to a fresh app and checks what it stored: the key, or nothing and one more `host`. */
async function check(start: (o: PageCacheOptions) => Promise<Served>, options: PageCacheOptions, cases: Case[]) {
  const app = await start(options);
  try {
    for (const [i, c] of cases.entries()) {
      const what = `${c.target} ${JSON.stringify(c.lines)} with ${JSON.stringify(options)}`;
      const before = {
        saved: app.saved.length,
        stored: app.pages.stats.stored,
        host: app.pages.stats.notStored.host ?? 0,
      };
      const status = await raw(app.port, [`GET ${c.target} HTTP/${c.version ?? "1.1"}`, ...c.lines].join("\r\n"));
      assert.equal(status, 200, `${what}: the app answered ${status}`);
      const deadline = Date.now() + 5000;
      while (app.saved.length === before.saved && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      assert.equal(app.saved.length, before.saved + 1, `${what}: the page was not decided (case ${i})`);
      assert.equal(app.saved.at(-1), c.key, what);
      if (c.key === undefined) {
        assert.equal(app.pages.stats.notStored.host ?? 0, before.host + 1, `${what}: not counted as host`);
        assert.equal(app.pages.stats.stored, before.stored, what);
      } else {
        assert.equal(app.pages.stats.stored, before.stored + 1, what);
        assert.ok((await app.pages.store.get(c.key)) !== undefined, `${what}: ${c.key} is not in the store`);
      }
    }
  } finally {
    await app.close();
  }
}

const v = (path: string) => `GET:http://victim.example${path}`;

// Loopback's own address is the peer of every request here: trusted below only where the options say so.
const UNTRUSTED: Case[] = [
  { target: "/plain", lines: ["Host: victim.example"], key: v("/plain") },
  { target: "/xfh", lines: ["Host: victim.example", "X-Forwarded-Host: evil.example"], key: v("/xfh") },
  { target: "/xfp", lines: ["Host: victim.example", "X-Forwarded-Proto: https"], key: v("/xfp") },
  {
    target: "/fwd",
    lines: ["Host: victim.example", "Forwarded: for=1.2.3.4;host=evil.example;proto=https"],
    key: v("/fwd"),
  },
  { target: "/admin", lines: ["Host: victim.example/admin"], key: undefined },
  { target: "/userinfo", lines: ["Host: evil@victim.example"], key: undefined },
  { target: "/bigport", lines: ["Host: victim.example:99999"], key: undefined },
  { target: "/noport", lines: ["Host: victim.example:"], key: undefined },
  { target: "/escaped", lines: ["Host: victim.example%2fadmin"], key: undefined },
  { target: "http://evil.example/abs", lines: ["Host: victim.example"], key: undefined },
  { target: "http://victim.example/abs?b=2&a=1", lines: ["Host: victim.example"], key: undefined },
  { target: "HTTP://VICTIM.example:80/abs", lines: ["Host: victim.example"], key: undefined },
  { target: "http://evil@victim.example/abs", lines: ["Host: victim.example"], key: undefined },
  { target: "/nohost", lines: [], key: undefined, version: "1.0" },
  { target: "/twohosts", lines: ["Host: victim.example", "Host: evil.example"], key: undefined },
];

const TRUSTED: Case[] = [
  {
    target: "/xfh",
    lines: ["Host: victim.example", "X-Forwarded-Host: evil.example"],
    key: "GET:http://evil.example/xfh",
  },
  {
    target: "/xfp",
    lines: ["Host: victim.example", "X-Forwarded-Proto: https"],
    key: "GET:https://victim.example/xfp",
  },
  {
    target: "/fwd",
    lines: ["Host: victim.example", 'Forwarded: for=1.2.3.4;host="shop.example:8080";proto=https'],
    key: "GET:https://shop.example:8080/fwd",
  },
  { target: "/xfh-path", lines: ["Host: victim.example", "X-Forwarded-Host: victim.example/admin"], key: undefined },
  { target: "/xfh-user", lines: ["Host: victim.example", "X-Forwarded-Host: evil@victim.example"], key: undefined },
  {
    target: "/disagree",
    lines: ["Host: victim.example", "X-Forwarded-Host: a.example", "Forwarded: host=b.example"],
    key: undefined,
  },
  { target: "/gopher", lines: ["Host: victim.example", "X-Forwarded-Proto: gopher"], key: undefined },
  { target: "/admin", lines: ["Host: victim.example/admin"], key: undefined },
  { target: "http://evil.example/abs", lines: ["Host: victim.example"], key: undefined },
];

const SITE: Case[] = [
  { target: "/same", lines: ["Host: shop.example:8443"], key: "GET:http://shop.example:8443/same" },
  { target: "/case", lines: ["Host: SHOP.Example:8443"], key: "GET:http://shop.example:8443/case" },
  { target: "/portless", lines: ["Host: shop.example"], key: undefined },
  { target: "/otherport", lines: ["Host: shop.example:8444"], key: undefined },
  { target: "/other", lines: ["Host: victim.example:8443"], key: undefined },
  {
    target: "/xfh",
    lines: ["Host: shop.example:8443", "X-Forwarded-Host: victim.example"],
    key: "GET:http://shop.example:8443/xfh",
  },
  { target: "/userinfo", lines: ["Host: evil@shop.example:8443"], key: undefined },
  { target: "http://victim.example:8443/abs", lines: ["Host: shop.example:8443"], key: undefined },
];

for (const [name, start] of [
  ["the Express/Connect middleware on node:http", connectApp],
  ["the Fastify plugin", fastifyApp],
] as const) {
  describe(`${name}, a real server on loopback`, () => {
    test("a direct request from an untrusted peer is keyed on its plain Host or not stored", () =>
      check(start, { trustedProxies: ["10.0.0.0/8", "fd00::/8"] }, UNTRUSTED));
    test("with no trusted proxies at all, forwarding fields are ignored too", () =>
      check(start, {}, UNTRUSTED.slice(0, 4)));
    test("a trusted proxy's forwarded host and protocol are believed, if plain and agreed", () =>
      check(start, { trustedProxies: ["127.0.0.1"] }, TRUSTED));
    test("a trusted network (CIDR) too", () => check(start, { trustedProxies: ["127.0.0.0/8"] }, TRUSTED.slice(0, 2)));
    test("with a site, only the site's authority is stored, whatever the Host or the forwarding fields", () =>
      check(start, { site: "shop.example:8443" }, SITE));
    test("a trusted proxy cannot name another site than the configured one", () =>
      check(start, { site: "shop.example", trustedProxies: ["127.0.0.1"] }, [
        { target: "/p", lines: ["Host: shop.example", "X-Forwarded-Host: evil.example"], key: undefined },
        {
          target: "/q",
          lines: ["Host: evil.example", "X-Forwarded-Host: SHOP.example:80"],
          key: "GET:http://shop.example/q",
        },
      ]));
  });
}

test("a dual-stack server sees loopback as ::ffff:127.0.0.1, which a trusted 127.0.0.1 covers (IPv4-mapped)", () =>
  check((o) => connectApp(o, "::"), { trustedProxies: ["127.0.0.1"] }, TRUSTED.slice(0, 2)));
