// Every case of every file in spec/vectors, one test each, through the same cases the conformance runner judges
// (test/conformance.ts), so the matrix and the suite cannot disagree; and the runner's own contract.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { casesOf, FILES, judge, runCase } from "./conformance.js";
import { LARDER_FAULTS, LARDER_HOSTILE, REPO, TS_ROOT } from "./support/paths.js";
import { type ServerProcess, startMemcached, startRedis } from "./support/servers.js";

const VECTORS = join(REPO, "spec", "vectors");

describe("spec/vectors", () => {
  // hostile_keys.json probes a memcached and a Redis it may flush: this suite's own, passed as conformance.py passes
  // its servers (LARDER_CONFORMANCE_*); hostile_replies.json starts larder-hostile (LARDER_HOSTILE, test.sh's), and
  // outage.json larder-faults (LARDER_FAULTS) in front of the same two servers.
  const servers: ServerProcess[] = [];
  before(async () => {
    const [memcached, redis] = await Promise.all([startMemcached(), startRedis()]);
    servers.push(memcached, redis);
    process.env.LARDER_CONFORMANCE_MEMCACHED = memcached.address;
    process.env.LARDER_CONFORMANCE_REDIS = redis.address;
    process.env.LARDER_HOSTILE ??= LARDER_HOSTILE;
    process.env.LARDER_FAULTS ??= LARDER_FAULTS;
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });
  for (const file of Object.keys(FILES)) {
    describe(file, () => {
      for (const c of casesOf(join(VECTORS, file)))
        test(c.name, async () => {
          const e = await runCase(c);
          if (e !== undefined) throw e;
        });
    });
  }
  test("every vector file is known to the runner", () => {
    const files = readdirSync(VECTORS).filter((f) => f.endsWith(".json"));
    assert.deepEqual(
      files.filter((f) => !(f in FILES)),
      [],
    );
  });
});

describe("conformance runner", () => {
  const runner = join(TS_ROOT, "build", "test", "conformance.js");
  test("prints one JSON line per file and exits 0", () => {
    // hostile_pages.json and hostile_files.json need no server: the matrix's command, as conformance.py runs it
    const files = ["ring.json", "keys.json", "hostile_pages.json", "hostile_files.json"];
    const out = execFileSync(process.execPath, [runner, ...files.map((f) => `spec/vectors/${f}`)], {
      cwd: REPO,
      encoding: "utf8",
    });
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => [l.language, l.file, l.status, l.reason]),
      files.map((f) => ["typescript", f, "pass", null]),
    );
  });
  test("a hostile file whose servers are not given fails, naming the variable", async () => {
    const saved = [process.env.LARDER_CONFORMANCE_MEMCACHED, process.env.LARDER_CONFORMANCE_REDIS];
    delete process.env.LARDER_CONFORMANCE_MEMCACHED;
    delete process.env.LARDER_CONFORMANCE_REDIS;
    try {
      const r = await judge(join(VECTORS, "hostile_keys.json"));
      assert.equal(r.status, "fail");
      assert.match(r.reason ?? "", /LARDER_CONFORMANCE_(MEMCACHED|REDIS) is not set/);
      assert.equal(r.cases, 55, "one case per entry of the file");
      assert.equal(r.failed.length, 20, "every case fails (at most 20 named)");
    } finally {
      if (saved[0] !== undefined) process.env.LARDER_CONFORMANCE_MEMCACHED = saved[0];
      if (saved[1] !== undefined) process.env.LARDER_CONFORMANCE_REDIS = saved[1];
    }
  });
  test("a wrong case fails with its name and reason", async () => {
    const dir = mkdtempSync(join(tmpdir(), "larder-ts-"));
    const path = join(dir, "keys.json");
    writeFileSync(
      path,
      JSON.stringify({
        schema: 1,
        http: [{ name: "wrong", method: "GET", url: "http://a/", key: "nope" }],
        safe: [],
        namespaced: [],
        variants: [],
        alternates: [],
      }),
    );
    const r = await judge(path);
    assert.equal(r.status, "fail");
    assert.deepEqual(r.failed, ["http/wrong"]);
    assert.match(r.reason ?? "", /GET:http:\/\/a\//);
  });
  test("an unknown or unreadable file is a failure, not a pass", async () => {
    const dir = mkdtempSync(join(tmpdir(), "larder-ts-"));
    writeFileSync(join(dir, "new.json"), "{}");
    assert.equal((await judge(join(dir, "new.json"))).status, "fail");
    writeFileSync(join(dir, "ring.json"), "{not json");
    assert.equal((await judge(join(dir, "ring.json"))).status, "fail");
    assert.equal((await judge(join(dir, "entries.json"))).status, "fail");
  });
  test("without files it exits 2", () => {
    assert.throws(
      () => execFileSync(process.execPath, [runner], { stdio: "pipe" }),
      (e: { status: number }) => e.status === 2,
    );
  });
});
