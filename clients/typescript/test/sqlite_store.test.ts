// The SQLite store (spec/STORES.md §6) beyond the shared contract: counters stay exact while Python and Ruby
// processes increment the same database file, another process's write lock is waited for within the bound without
// stalling Node's event loop, and hostile databases (not SQLite, truncated, a newer schema, a key-hash collision)
// give typed errors or misses, never a crash.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { openStore, type StoreError } from "../src/stores/index.js";
import { BUSY_WAIT_MS, keyHash } from "../src/stores/sqlite.js";
import { otherLanguagesIncrement } from "./support/counters.js";
import { watchEventLoop } from "./support/event_loop.js";
import { TS_ROOT } from "./support/paths.js";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));
const dirs: string[] = [];
function database(): string {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-sqlite-"));
  dirs.push(dir);
  return join(dir, "cache.db");
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
});

/** Runs Python's own sqlite3 module on the database (the test's view from outside the store). */
function pythonSql(path: string, script: string): string {
  const r = spawnSync("python3", ["-c", `import sqlite3,sys\ndb=sqlite3.connect(sys.argv[1])\n${script}`, path], {
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test("increments from Python, Ruby and TypeScript processes at once lose none", async () => {
  const url = `sqlite://${database()}`;
  const store = openStore(url);
  await store.set("warm", bytes("1")); // the schema exists before the others start
  const times = 150;
  const others = otherLanguagesIncrement(url, "shared-counter", times);
  await others.ready;
  for (let i = 0; i < times; i++) await store.incr("shared-counter", 1);
  await Promise.all(Array.from({ length: 30 }, () => store.incr("shared-counter", 1)));
  await others.done;
  assert.deepEqual(await store.get("shared-counter"), bytes(String(3 * times + 30)));
  await store.close();
});

function holdWriteLock(path: string, seconds: number) {
  const script = `import sqlite3,sys,time
db=sqlite3.connect(sys.argv[1],isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("held",flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")`;
  const child = spawn("python3", ["-c", script, path, String(seconds)], { stdio: ["ignore", "pipe", "inherit"] });
  const held = new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  return { child, held };
}

test("another process's write lock: waited for, at most BUSY_WAIT_MS, while Node keeps running", async () => {
  const path = database();
  const store = openStore(`sqlite://${path}`);
  await store.set("k", bytes("before"));
  const loop = watchEventLoop();
  try {
    const brief = holdWriteLock(path, 0.5);
    await brief.held;
    let started = Date.now();
    await store.set("k", bytes("after a wait"));
    assert.ok(Date.now() - started >= 300, `the write did not wait for the lock (${Date.now() - started} ms)`);
    assert.deepEqual(await store.get("k"), bytes("after a wait"));

    const long = holdWriteLock(path, BUSY_WAIT_MS / 1000 + 3);
    await long.held;
    started = Date.now();
    await assert.rejects(store.set("k", bytes("never")), (e: StoreError) => e.kind === "timeout");
    const waited = Date.now() - started;
    assert.ok(waited >= BUSY_WAIT_MS - 50 && waited < BUSY_WAIT_MS + 1000, `waited ${waited} ms`);
    assert.ok(loop.longestGapMs() < 1000, `the event loop stopped for ${loop.longestGapMs()} ms while waiting`);
    assert.deepEqual(await store.get("k"), bytes("after a wait"), "readers are not blocked by a writer (WAL)");
    long.child.kill();
  } finally {
    loop.stop();
    await store.close();
  }
});

test("a file that is not an SQLite database, or a truncated one, gives the store's error, not a crash", async () => {
  const garbage = database();
  writeFileSync(garbage, Buffer.alloc(8192, 0x5a));
  const store = openStore(`sqlite://${garbage}`);
  await assert.rejects(store.get("k"), (e: StoreError) => e.kind === "server" && e.backend === "sqlite");
  await assert.rejects(store.set("k", bytes("v")), (e: StoreError) => e.kind === "server");
  await store.close();
  assert.deepEqual(readFileSync(garbage), Buffer.alloc(8192, 0x5a), "the foreign file was changed");

  const path = database();
  const writer = openStore(`sqlite://${path}`);
  for (let i = 0; i < 200; i++) await writer.set(`k${i}`, new Uint8Array(2000).fill(i));
  await writer.close(); // checkpoints the WAL into the file
  truncateSync(path, 10_000);
  const reader = openStore(`sqlite://${path}`);
  for (const key of ["k0", "k150", "k199"]) {
    try {
      const value = await reader.get(key);
      assert.ok(value === undefined || value.length === 2000, key);
    } catch (e) {
      assert.equal((e as StoreError).kind, "server", String(e));
    }
  }
  await reader.close();
});

test("a database of a newer larder schema is refused, naming both versions", async () => {
  const path = database();
  const store = openStore(`sqlite://${path}`);
  await store.set("k", bytes("v"));
  await store.close();
  pythonSql(path, 'db.execute("UPDATE larder_entries_schema SET version = 7"); db.commit()');
  const newer = openStore(`sqlite://${path}`);
  await assert.rejects(newer.get("k"), /version 7, newer than this larder's 1/);
  await newer.close();
});

test("a row with the key's hash but another key is a miss, and a write replaces it", async () => {
  const path = database();
  const store = openStore(`sqlite://${path}`);
  await store.set("warm", bytes("v"));
  pythonSql(
    path,
    `db.execute("INSERT INTO larder_entries VALUES (?, 'intruder', x'6576696c', 11, 0, NULL)", (int(sys.argv[2]),)); db.commit()`.replace(
      "sys.argv[2]",
      keyHash("victim").toString(),
    ),
  );
  assert.equal(await store.get("victim"), undefined);
  assert.equal(await store.incr("victim", 1, undefined, false), undefined);
  assert.equal(
    await store.add("victim", bytes("mine")),
    false,
    "add treats the collision as present (the spec's rule)",
  );
  await store.set("victim", bytes("mine"));
  assert.deepEqual(await store.get("victim"), bytes("mine"));
  assert.equal(
    pythonSql(
      path,
      "print(db.execute(\"SELECT count(*) FROM larder_entries WHERE key = 'intruder'\").fetchone()[0])",
    ).trim(),
    "0",
  );
  await store.close();
});

test("sqlite:// URLs: a file is required, unknown options are refused", () => {
  assert.throws(() => openStore("sqlite://"), /needs a file/);
  assert.throws(() => openStore("sqlite://host/cache.db"), /takes a path/);
  assert.throws(() => openStore(`sqlite://${database()}?timeout=1s`), /unknown option timeout/);
  assert.throws(() => openStore(`sqlite://${database()}?table=Bad-Name`), /table/);
});

test("without koffi the local stores fail with NativeUnavailable, and nothing else needs it", () => {
  // This build, copied where no node_modules above it holds koffi, with every other dependency linked.
  const root = mkdtempSync(join(tmpdir(), "larder-ts-nokoffi-"));
  dirs.push(root);
  cpSync(join(TS_ROOT, "build", "src"), join(root, "build", "src"), { recursive: true });
  writeFileSync(join(root, "package.json"), JSON.stringify({ type: "module" }));
  mkdirSync(join(root, "node_modules"));
  for (const name of readdirSync(join(TS_ROOT, "node_modules")))
    if (name !== "koffi") symlinkSync(join(TS_ROOT, "node_modules", name), join(root, "node_modules", name));
  const script = `
import { openStore } from "./build/src/stores/index.js";
const out = {};
const files = openStore("file://${root}/files");
await files.set("k", new Uint8Array([1]));
out.fileGet = Array.from(await files.get("k"));
for (const [name, run] of [["fileAdd", () => files.add("j", new Uint8Array([1]))], ["sqlite", () => openStore("sqlite://${root}/c.db").get("k")]]) {
  try { await run(); out[name] = "no error"; } catch (e) { out[name] = [e.name, e.kind, e.message]; }
}
const memory = openStore("memory://");
await memory.set("k", new Uint8Array([2]));
out.memory = Array.from(await memory.get("k"));
console.log(JSON.stringify(out));
`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out.fileGet, [1], "plain reads and writes of files need no koffi");
  assert.deepEqual(out.memory, [2]);
  for (const name of ["fileAdd", "sqlite"]) {
    assert.equal(out[name][0], "NativeUnavailable", `${name}: ${out[name]}`);
    assert.equal(out[name][1], "unsupported");
    assert.match(out[name][2], /koffi/);
  }
});
