// The Fastify plugin with a real Fastify app: a page it renders is stored for the front under the front's key
// (found by PageCache.find as the front would), with its tags; an uncacheable one is not; a tag purge removes it.

import assert from "node:assert/strict";
import { test } from "node:test";
import Fastify from "fastify";
import { larderFastify } from "../src/fastify.js";
import { frontHeaders, PageCache } from "../src/pages.js";
import { HttpResponse } from "../src/response.js";
import { MemoryStore } from "../src/stores/memory.js";

test("Fastify pages are stored for larder's front", async () => {
  const pages = new PageCache(new MemoryStore());
  const saved: Array<string | undefined> = [];
  const app = Fastify();
  await app.register(larderFastify, { pages, onSaved: (key) => saved.push(key) });
  app.get("/article/:id", async (request, reply) => {
    for (const [name, value] of frontHeaders(60, { tags: [`article-${(request.params as { id: string }).id}`] }))
      reply.header(name, value);
    reply.type("text/html");
    return `<h1>article ${(request.params as { id: string }).id}</h1>`;
  });
  app.get("/nostore", async (_request, reply) => {
    reply.header("Cache-Control", "no-store");
    return "secret";
  });
  const page = await app.inject({
    method: "GET",
    url: "/article/7?b=2&a=1&utm_source=x",
    headers: { host: "shop.example" },
  });
  assert.equal(page.statusCode, 200);
  await app.inject({ method: "GET", url: "/nostore", headers: { host: "shop.example" } });
  const deadline = Date.now() + 5000;
  while (saved.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(saved, ["GET:http://shop.example/article/7?a=1&b=2", undefined]);
  const found = await pages.find({
    method: "GET",
    scheme: "http",
    authority: "shop.example",
    target: "/article/7?a=1&b=2",
    headers: [],
  });
  assert.ok(found !== undefined);
  const [, entry] = found;
  assert.ok(entry.value instanceof HttpResponse);
  assert.equal(Buffer.from(entry.value.body).toString(), "<h1>article 7</h1>");
  assert.deepEqual(entry.tags, ["article-7"]);
  assert.equal(pages.stats.notStored["no-store"], 1);
  assert.equal(await pages.purge({ tag: "article-7" }), 1);
  assert.equal(
    await pages.find({
      method: "GET",
      scheme: "http",
      authority: "shop.example",
      target: "/article/7?a=1&b=2",
      headers: [],
    }),
    undefined,
  );
  await app.close();
});
