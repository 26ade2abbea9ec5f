// Next.js end to end: the app in test/next-app, built with `next build` (a real build, here, every run), two
// `next start` instances whose cacheHandler is larder's on one memcached, `larder serve --store memcached://…` in
// front of the first. A page rendered once is served by the front and by the other instance without rendering
// (the app logs every render, the data server counts every fetch); revalidateTag in one instance and `larder store
// purge --tag` from the Rust CLI make it render again, once, for both; Python reads the page Node wrote.

import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { after, before, describe, test } from "node:test";
import { decode } from "../src/entry.js";
import { openStore } from "../src/stores/index.js";
import { get, startFront, waitFor } from "./support/front.js";
import { LARDER_BIN, REPO, TS_ROOT } from "./support/paths.js";
import { freePort, type ServerProcess, startMemcached } from "./support/servers.js";

const NEXT_BIN = join(TS_ROOT, "node_modules", "next", "dist", "bin", "next");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** memcached's purge records also hide what is written within 1 s after a purge (STORES.md §4.4 skew). */
const SKEW_MS = 1100;

/** The first "rendered by X at T" of a page, which is what tells two renders apart. */
function rendering(body: string): string {
  const found = /rendered by (?:<!-- -->)?(\w+)(?:<!-- -->)? at (?:<!-- -->)?(\d+)/.exec(body);
  assert.ok(found, `not an article page: ${body.slice(0, 200)}`);
  return `${found[1]}@${found[2]}`;
}

/** Every key memcached holds (its lru_crawler metadump), decoded. */
function memcachedKeys(port: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => socket.write("lru_crawler metadump all\r\n"));
    let text = "";
    socket.setTimeout(5000, () => socket.destroy(new Error("metadump timed out")));
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      if (text.endsWith("END\r\n")) {
        socket.end();
        resolve([...text.matchAll(/^key=(\S+)/gm)].map((m) => decodeURIComponent(m[1] as string)));
      }
    });
    socket.on("error", reject);
  });
}

/** Where the app is built and started. Turbopack resolves `next` from the app's folder upwards, so it is inside this
 * package; the build records this path, so it is the same on every run (a cached build is valid only here). */
const APP_DIR = join(TS_ROOT, "build", "next-e2e-app");

/** What the build depends on: the app's source, Next's version and the folder it is built in. */
function buildKey(source: string): string {
  const hash = createHash("sha256");
  const files = readdirSync(source, { recursive: true, encoding: "utf8" }).sort();
  for (const file of files) {
    const path = join(source, file);
    if (!statSync(path).isFile()) continue;
    hash.update(`${file}\0`).update(readFileSync(path)).update("\0");
  }
  const nextVersion = (
    JSON.parse(readFileSync(join(TS_ROOT, "node_modules", "next", "package.json"), "utf8")) as {
      version: string;
    }
  ).version;
  return hash.update(`next ${nextVersion}\0${APP_DIR}`).digest("hex").slice(0, 32);
}

/** `next build` of test/next-app in `appDir`: a real build, kept under CACHE_DIR (without Turbopack's own cache) and
 * reused while its key is the same, since a build takes 10 s to 90 s on this shared machine. */
async function buildApp(appDir: string, env: NodeJS.ProcessEnv): Promise<void> {
  const source = join(TS_ROOT, "test", "next-app");
  rmSync(appDir, { recursive: true, force: true });
  cpSync(source, appDir, { recursive: true });
  const cacheDir = process.env.CACHE_DIR;
  const cached = cacheDir === undefined ? undefined : join(cacheDir, "next-e2e", buildKey(source));
  if (cached !== undefined && existsSync(join(cached, "BUILD_ID"))) {
    cpSync(cached, join(appDir, ".next"), { recursive: true });
    process.stderr.write(`# next build: reused ${cached}\n`);
    return;
  }
  const started = Date.now();
  const build = spawnSync(process.execPath, [NEXT_BIN, "build"], {
    cwd: appDir,
    env,
    encoding: "utf8",
    timeout: 300_000,
  });
  assert.equal(build.status, 0, `next build failed:\n${build.stdout}\n${build.stderr}`);
  process.stderr.write(`# next build took ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  if (cached === undefined) return;
  const parent = join(cached, "..");
  rmSync(parent, { recursive: true, force: true }); // earlier builds' outputs
  mkdirSync(parent, { recursive: true });
  const staging = `${cached}.${process.pid}.tmp`;
  cpSync(join(appDir, ".next"), staging, { recursive: true, filter: (path) => !path.includes(`.next${sep}cache`) });
  try {
    renameSync(staging, cached);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another run cached the same build first
  }
}

describe("Next.js behind larder serve, two instances sharing one memcached through the cacheHandler", () => {
  const namespace = `e2e-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), "larder-next-e2e-"));
  const renderLog = join(work, "renders.log");
  const appDir = APP_DIR;
  const env: NodeJS.ProcessEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  delete env.LARDER_NEXT_STORE; // the build runs without the handler
  const dataHits = new Map<string, number>();
  let data: http.Server;
  let memcached: ServerProcess;
  let storeUrl: string;
  const instances: Record<string, { port: number; child: ChildProcess }> = {};
  let front: ChildProcess;
  let frontPort: number;

  const renders = (instance: string) =>
    existsSync(renderLog)
      ? readFileSync(renderLog, "utf8")
          .split("\n")
          .filter((line) => line.startsWith(`${instance} `)).length
      : 0;

  before(async () => {
    await buildApp(appDir, env);
    data = http.createServer((req, res) => {
      const n = (dataHits.get(req.url ?? "") ?? 0) + 1;
      dataHits.set(req.url ?? "", n);
      res.end(`data for ${req.url} #${n}`);
    });
    const dataPort = await freePort();
    await new Promise<void>((r) => data.listen(dataPort, "127.0.0.1", r));
    memcached = await startMemcached();
    storeUrl = `memcached://${memcached.address}`;

    await Promise.all(
      ["a", "b"].map(async (instance) => {
        const port = await freePort();
        const child = spawn(process.execPath, [NEXT_BIN, "start", "-p", String(port), "-H", "127.0.0.1"], {
          cwd: appDir,
          stdio: "ignore",
          detached: true, // its own process group, stopped whole in after()
          env: {
            ...env,
            LARDER_NEXT_STORE: storeUrl,
            LARDER_NEXT_NAMESPACE: namespace,
            DATA_URL: `http://127.0.0.1:${dataPort}`,
            RENDER_LOG: renderLog,
            INSTANCE: instance,
          },
        });
        instances[instance] = { port, child };
        await waitFor(
          async () => (await get(port, "/nothing-here")).status === 404,
          `next start (${instance})`,
          60_000,
        );
      }),
    );
    ({ process: front, port: frontPort } = await startFront(
      `http://127.0.0.1:${instances.a?.port}`,
      storeUrl,
      namespace,
    ));
  });

  after(async () => {
    front?.kill("SIGTERM");
    for (const { child } of Object.values(instances)) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
      } catch {}
    }
    await new Promise((r) => (data ? data.close(r) : r(undefined)));
    await memcached?.stop();
    rmSync(appDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  const port = (instance: "a" | "b") => instances[instance]?.port as number;
  let current = "";

  test("a page rendered once is served by the front and by the other instance without rendering", async () => {
    const first = await get(frontPort, "/article/7");
    assert.equal(first.status, 200);
    assert.match(String(first.headers["x-cache"]), /^MISS/);
    current = rendering(first.body);
    assert.match(current, /^a@/);
    assert.equal(renders("a"), 1);
    for (let i = 0; i < 3; i++) {
      const again = await get(frontPort, "/article/7");
      assert.match(String(again.headers["x-cache"]), /^HIT/);
      assert.equal(again.body, first.body);
    }
    const fromB = await get(port("b"), "/article/7");
    assert.equal(fromB.status, 200);
    // What Next says of it (x-nextjs-cache) is Next's to word; when it says something, it is not a miss.
    const nextSays = fromB.headers["x-nextjs-cache"];
    if (nextSays !== undefined) assert.notEqual(nextSays, "MISS");
    assert.equal(rendering(fromB.body), current, "b served a's page from the shared store");
    assert.deepEqual([renders("a"), renders("b"), dataHits.get("/article/7")], [1, 0, 1]);
  });

  test("Python reads the page Node wrote", async () => {
    const keys = (await memcachedKeys(memcached.port)).filter(
      (k) => k.startsWith(`${namespace}:`) && k.includes(":/route-cache/") && k.endsWith("/article/7"),
    );
    assert.equal(keys.length, 1, `the page's key among ${keys}`);
    const script = [
      "import sys, json, larder",
      "from larder.stores import open_store",
      "e = larder.decode(open_store(sys.argv[1]).get(sys.argv[2]))",
      "v = e.value['value']",
      "print(json.dumps({'kind': v['kind'], 'html': v['html'], 'rsc': len(v['rscData']), 'tags': list(e.tags)}))",
    ].join("\n");
    const r = spawnSync(join(REPO, ".venv", "bin", "python"), ["-c", script, storeUrl, keys[0] as string], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    const read = JSON.parse(r.stdout) as { kind: string; html: string; rsc: number; tags: string[] };
    // The kind is Next's name for what it gave the handler: Python reads the one Node reads back.
    const store = openStore(storeUrl);
    try {
      const stored = decode((await store.get(keys[0] as string)) as Uint8Array).value as { value: { kind: unknown } };
      assert.equal(read.kind, stored.value.kind);
    } finally {
      await store.close();
    }
    assert.equal(rendering(read.html), current);
    assert.ok(read.rsc > 0);
    assert.ok(read.tags.includes("articles") && read.tags.includes("article-7"), String(read.tags));
  });

  test("revalidateTag in the other instance makes the page render again, once, for the front and both instances", async () => {
    await sleep(SKEW_MS);
    const revalidated = await get(port("b"), "/api/revalidate?tag=article-7", {}, "POST");
    assert.equal(revalidated.status, 200, revalidated.body);
    await sleep(SKEW_MS);
    const viaFront = await get(frontPort, "/article/7");
    assert.match(String(viaFront.headers["x-cache"]), /^MISS/);
    const next = rendering(viaFront.body);
    assert.notEqual(next, current);
    assert.match(viaFront.body, /data for \/article\/7 #2/, "the tagged fetch was revalidated too");
    assert.equal(rendering((await get(port("b"), "/article/7")).body), next);
    assert.match(String((await get(frontPort, "/article/7")).headers["x-cache"]), /^HIT/);
    assert.deepEqual([renders("a"), renders("b"), dataHits.get("/article/7")], [2, 0, 2]);
    current = next;
  });

  test("`larder store purge --tag` from the Rust CLI reaches both instances and the front", async () => {
    await sleep(SKEW_MS);
    const purge = spawnSync(LARDER_BIN, ["store", "purge", "--store", storeUrl, "--tag", "articles"], {
      encoding: "utf8",
    });
    assert.equal(purge.status, 0, purge.stderr);
    await sleep(SKEW_MS);
    const fromB = await get(port("b"), "/article/7");
    const byB = rendering(fromB.body);
    assert.match(byB, /^b@/);
    const viaFront = await get(frontPort, "/article/7");
    assert.match(String(viaFront.headers["x-cache"]), /^MISS/);
    assert.equal(rendering(viaFront.body), byB, "a served b's new render from the shared store");
    assert.deepEqual([renders("a"), renders("b"), dataHits.get("/article/7")], [2, 1, 3]);
  });

  // Issue 32, finding 1: Next decodes route params into the page's cache key, and the cacheHandler wrote memcached
  // commands as latin1, so one anonymous GET whose path held U+010D U+010A (CR LF), U+0120 (space) and U+012F (`/`,
  // which Next would keep escaped as %2F) ran an `ms`
  // for another site's page, or a `flush_all`. Last in this file: on a client that still did so, it empties the
  // store. Keys now go out as their UTF-8: the page is stored under one harmless key, nothing else is written.
  test("an anonymous URL smuggling memcached commands into a page's key writes nothing else and flushes nothing", async () => {
    const victim = `${namespace}:GET:http://victim.example/`;
    const sentinel = `${namespace}:sentinel`;
    const smuggled = (commands: string) =>
      `x\u010d\u010a${commands.replace(/\r\n/g, "\u010d\u010a").replace(/ /g, "\u0120").replace(/\//g, "\u012f")}\u010d\u010amn`;
    const store = openStore(storeUrl);
    try {
      await store.set(sentinel, new Uint8Array(Buffer.from("safe")));
      for (const id of [smuggled(`ms ${victim} 5 T0 F0\r\nPWNED`), smuggled("flush_all")]) {
        const page = await get(port("a"), `/article/${encodeURIComponent(id)}`);
        assert.equal(page.status, 200, page.body.slice(0, 200));
        // the handler writes the page after answering: wait for it under a key ending with the path's UTF-8, or for
        // what the smuggled command would have done
        const stored = async () =>
          (await memcachedKeys(memcached.port)).some((k) => k.includes(":/route-cache/") && k.endsWith(id));
        const smuggledRan = async () =>
          (await store.get(victim)) !== undefined || (await store.get(sentinel)) === undefined;
        await waitFor(async () => (await stored()) || (await smuggledRan()), `the page of ${JSON.stringify(id)}`);
        assert.equal(await smuggledRan(), false, "the smuggled command ran");
        assert.ok(await stored(), "the page is stored under its own key");
      }
      assert.equal(await store.get(victim), undefined, "the smuggled ms wrote victim.example's page");
      assert.deepEqual(await store.get(sentinel), new Uint8Array(Buffer.from("safe")), "the smuggled flush_all ran");
      const viaFront = await get(frontPort, "/", { Host: "victim.example" });
      assert.doesNotMatch(viaFront.body, /PWNED/);
      assert.doesNotMatch(String(viaFront.headers["x-cache"]), /^HIT/);
    } finally {
      await store.close();
    }
  });
});
