// Pages written by a Node app are served by the Rust front: a node:http app with the Express/Connect middleware,
// `larder serve --store memcached://…` in front of it. A page the app rendered for a request that never went
// through larder is served by larder without reaching Node (the app counts its renders); a tag purge from
// TypeScript makes the app render again; Python reads the page Node wrote. And the storage rules decide: a page
// that sets a cookie or says private is not stored.

import assert from "node:assert/strict";
import { type ChildProcess, spawnSync } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { decode } from "../src/entry.js";
import { larderPages } from "../src/express.js";
import { frontHeaders, PageCache } from "../src/pages.js";
import { HttpResponse } from "../src/response.js";
import { get, startFront, waitFor } from "./support/front.js";
import { REPO } from "./support/paths.js";
import { freePort, type ServerProcess, startMemcached } from "./support/servers.js";

describe("Express/Connect middleware behind larder serve", () => {
  let memcached: ServerProcess;
  let app: http.Server;
  let appPort: number;
  let front: ChildProcess;
  let frontPort: number;
  let pages: PageCache;
  const renders = new Map<string, number>();
  const saved: Array<string | undefined> = [];
  const namespace = `ts-${process.pid}`;

  before(async () => {
    memcached = await startMemcached();
    const storeUrl = `memcached://${memcached.address}`;
    pages = new PageCache(storeUrl, { namespace });
    const middleware = larderPages(pages, { onSaved: (key) => saved.push(key) });
    app = http.createServer((req, res) => {
      middleware(req, res, () => {
        const path = (req.url ?? "/").split("?")[0] as string;
        const n = (renders.get(path) ?? 0) + 1;
        renders.set(path, n);
        const tag = path.replace(/\//g, "-").slice(1);
        // Surrogate-Control governs when present (it replaces Cache-Control for the front): /private has none.
        const headers: Record<string, string> =
          path === "/private"
            ? { "Cache-Control": "private, max-age=60" }
            : Object.fromEntries(frontHeaders(60, { tags: [tag, "articles"] }));
        if (path === "/cookie") headers["Set-Cookie"] = "session=1";
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", ...headers });
        res.end(`${path} rendered #${n} – ünïcode`);
      });
    });
    appPort = await freePort();
    await new Promise<void>((r) => app.listen(appPort, "127.0.0.1", r));
    ({ process: front, port: frontPort } = await startFront(`http://127.0.0.1:${appPort}`, storeUrl, namespace));
  });
  after(async () => {
    front?.kill("SIGTERM");
    await new Promise<void>((r) => (app ? app.close(() => r()) : r()));
    await pages?.store.close();
    await memcached?.stop();
  });

  const settled = async (count: number) => waitFor(async () => saved.length >= count, "the page was not written");

  test("a page Node rendered without larder is served by larder without reaching Node", async () => {
    const direct = await get(appPort, "/article/2?b=2&a=1&utm_source=mail", { Host: `127.0.0.1:${frontPort}` });
    assert.equal(direct.status, 200);
    await settled(1);
    assert.match(String(saved.at(-1)), /^ts-\d+:GET:http:\/\/127\.0\.0\.1:\d+\/article\/2\?a=1&b=2$/);
    assert.equal(renders.get("/article/2"), 1);
    for (let i = 0; i < 3; i++) {
      const served = await get(frontPort, "/article/2?a=1&b=2&gclid=x");
      assert.equal(served.status, 200);
      assert.equal(served.body, direct.body);
      assert.match(String(served.headers["x-cache"]), /^HIT/);
    }
    assert.equal(renders.get("/article/2"), 1, "the front asked Node again");
  });

  test("Python reads the page Node wrote", async () => {
    const key = saved.at(-1) as string;
    const script =
      "import sys, json, larder\nfrom larder.stores import open_store\ne = larder.decode(open_store(sys.argv[1]).get(sys.argv[2]))\nprint(json.dumps({'status': e.value.status, 'body': e.value.body.decode(), 'tags': list(e.tags)}))";
    const r = spawnSync(join(REPO, ".venv", "bin", "python"), ["-c", script, `memcached://${memcached.address}`, key], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      status: 200,
      body: "/article/2 rendered #1 – ünïcode",
      tags: ["article-2", "articles"],
    });
    const entry = decode((await pages.store.get(key)) as Uint8Array);
    assert.ok(entry.value instanceof HttpResponse);
    assert.ok(
      !entry.value.headers.some(([n]) =>
        ["surrogate-control", "surrogate-key", "content-length"].includes(Buffer.from(n).toString()),
      ),
    );
  });

  test("a tag purge from TypeScript makes the app render again", async () => {
    await new Promise((r) => setTimeout(r, 1100)); // memcached's purge records hide entries written within 1 s after
    assert.equal(await pages.purge({ tag: "article-2" }), null);
    const again = await get(frontPort, "/article/2?a=1&b=2");
    assert.equal(again.status, 200);
    assert.match(again.body, /rendered #2/);
    assert.equal(renders.get("/article/2"), 2);
  });

  test("what the front's rules do not store is not stored", async () => {
    const before = saved.length;
    await get(appPort, "/private", { Host: `127.0.0.1:${frontPort}` });
    await get(appPort, "/cookie", { Host: `127.0.0.1:${frontPort}` });
    // The previous test's re-render may still be saving its page: count only what these two requests decided.
    const refused = () => saved.slice(before).filter((key) => key === undefined).length;
    await waitFor(async () => refused() >= 2, "the two pages were not decided");
    assert.equal(refused(), 2);
    assert.ok(!saved.slice(before).some((key) => key !== undefined && /\/(private|cookie)$/.test(key)));
    assert.equal(pages.stats.notStored.private, 1);
    assert.equal(pages.stats.notStored["set-cookie"], 1);
  });
});
