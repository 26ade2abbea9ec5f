// The file store (spec/STORES.md §7) beyond the shared contract: its flock really excludes other languages' writers,
// a held lock is waited for within a bound without stalling Node, and a hostile directory (links in any component,
// foreign files, a FIFO, truncated or forged files) gives misses or typed errors, never a crash, a hang, a file read
// or written through a link or a deleted foreign file; files and directories are created with the URL's `mode`
// (0600 and 0700 by default: a cache of private pages is the owner's alone).

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { encode } from "../src/entry.js";
import { FileStore, hashName, LOCK_WAIT_MS } from "../src/stores/file.js";
import { openStore, type StoreError, UrlError } from "../src/stores/index.js";
import { otherLanguagesIncrement } from "./support/counters.js";
import { watchEventLoop } from "./support/event_loop.js";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));
const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-files-"));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
});

function pathOf(root: string, key: string): string {
  const h = hashName(key);
  return join(root, h.slice(0, 2), h.slice(2, 4), h);
}

test("increments from Python, Ruby and TypeScript processes at once lose none (the flock excludes)", async () => {
  const root = tempDir();
  const store = openStore(`file://${root}`);
  const times = 150;
  const others = otherLanguagesIncrement(`file://${root}`, "shared-counter", times);
  await others.ready;
  for (let i = 0; i < times; i++) await store.incr("shared-counter", 1);
  // Within one process too: each call opens the lock file anew, and flock excludes open files, not processes.
  await Promise.all(Array.from({ length: 30 }, () => store.incr("shared-counter", 1)));
  await others.done;
  assert.deepEqual(await store.get("shared-counter"), bytes(String(3 * times + 30)));
});

test("a lock another process holds is waited for at most LOCK_WAIT_MS, and Node keeps running meanwhile", async () => {
  const root = tempDir();
  const store = openStore(`file://${root}`);
  await store.set("held", bytes("x")); // makes the shard directory
  const lockPath = join(pathOf(root, "held"), "..", ".lock");
  const holder = spawn(
    "python3",
    [
      "-c",
      "import fcntl,sys,time\nf=open(sys.argv[1],'a')\nfcntl.flock(f,fcntl.LOCK_EX)\nprint('held',flush=True)\ntime.sleep(8)",
      lockPath,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    await new Promise<void>((resolve) => holder.stdout.once("data", () => resolve()));
    const loop = watchEventLoop();
    const started = Date.now();
    await assert.rejects(store.add("held", bytes("y")), (e: StoreError) => e.kind === "timeout");
    loop.stop();
    const waited = Date.now() - started;
    assert.ok(waited >= LOCK_WAIT_MS - 50 && waited < LOCK_WAIT_MS + 1000, `waited ${waited} ms`);
    assert.ok(loop.longestGapMs() < 1000, `the event loop stopped for ${loop.longestGapMs()} ms while waiting`);
    assert.deepEqual(await store.get("held"), bytes("x"));
  } finally {
    holder.kill();
  }
  assert.equal(await store.add("other-key", bytes("z")), true);
});

test("links are never read through, written through or deleted", async () => {
  const root = tempDir();
  const outside = tempDir();
  const store = new FileStore(root);
  const elsewhere = new FileStore(outside);
  // A genuine entry of key "k" outside the root, and a link to it where "k"'s file belongs.
  await elsewhere.set("k", bytes("secret"));
  const target = pathOf(outside, "k");
  const link = pathOf(root, "k");
  mkdirSync(join(link, ".."), { recursive: true });
  symlinkSync(target, link);
  assert.equal(await store.get("k"), undefined, "a link is a miss");
  assert.equal(await store.delete("k"), false);
  await store.clear();
  assert.equal(await store.purgeTag("any"), 0);
  assert.ok(existsSync(link) && existsSync(target), "the link and its target survive clear and purges");
  assert.equal((await store.stats()).foreignFiles, 1);
  // A write meets the link at the entry's name: an error, and the link is not replaced (STORES.md §7).
  await assert.rejects(store.set("k", bytes("mine")), (e: StoreError) => e.kind === "server");
  await assert.rejects(store.add("k", bytes("mine")), (e: StoreError) => e.kind === "server");
  await assert.rejects(store.incr("k", 1), (e: StoreError) => e.kind === "server");
  assert.equal(await store.deleteIf("k", bytes("secret")), false);
  assert.ok(lstatSync(link).isSymbolicLink(), "the link was replaced");
  assert.equal(readlinkSync(link), target);
  assert.deepEqual(readFileSync(target).subarray(-6), Buffer.from("secret"), "written through the link");

  // A shard directory that is a link: not descended into, not written into.
  await elsewhere.set("j", bytes("secret too"));
  const h = hashName("j");
  rmSync(join(root, h.slice(0, 2)), { recursive: true, force: true });
  symlinkSync(join(outside, h.slice(0, 2)), join(root, h.slice(0, 2)));
  assert.equal(await store.get("j"), undefined);
  await assert.rejects(store.set("j", bytes("mine")), (e: StoreError) => e.kind === "server");
  await assert.rejects(store.incr("j", 1), (e: StoreError) => e.kind === "server");
  await store.clear();
  assert.deepEqual(await elsewhere.get("j"), bytes("secret too"));
  assert.deepEqual(await elsewhere.get("k"), bytes("secret"));
});

test("foreign, truncated and forged files are misses, left alone and counted; a FIFO does not block", async () => {
  const root = tempDir();
  const store = openStore(`file://${root}?capacity=64K`) as FileStore;
  await store.set("good", encode("v", { tags: ["t"] }));
  for (const key of ["truncated", "bad-magic", "long-key", "forged", "fifo", "huge"]) {
    mkdirSync(join(pathOf(root, key), ".."), { recursive: true });
  }
  await store.set("truncated", bytes("a value of some length"));
  truncateSync(pathOf(root, "truncated"), 16);
  await store.set("bad-magic", bytes("v"));
  const bad = readFileSync(pathOf(root, "bad-magic"));
  bad.write("XDR1", 0, "latin1");
  writeFileSync(pathOf(root, "bad-magic"), bad);
  await store.set("long-key", bytes("v"));
  const long = readFileSync(pathOf(root, "long-key"));
  long.writeUInt16LE(0xffff, 12);
  writeFileSync(pathOf(root, "long-key"), long);
  // "good"'s file under "forged"'s name: its key does not hash to the name.
  writeFileSync(pathOf(root, "forged"), readFileSync(pathOf(root, "good")));
  assert.equal(spawnSync("mkfifo", [pathOf(root, "fifo")]).status, 0);
  writeFileSync(join(root, "notes.txt"), "an operator's file");
  // "huge"'s genuine header, then a (sparse) length past any file the store writes: refused before it is read.
  await store.set("huge", bytes("v"));
  truncateSync(pathOf(root, "huge"), 200 << 20);
  mkdirSync(join(root, "zz"));

  for (const key of ["truncated", "bad-magic", "long-key", "forged", "fifo", "huge"])
    assert.equal(await store.get(key), undefined, key);
  assert.equal(await store.add("fifo", bytes("v")), true, "a FIFO in the way is replaced by a write");
  const stats = await store.stats();
  assert.equal(stats.entries, 2);
  assert.equal(stats.foreignFiles, 7, "truncated, bad magic, long key, forged, huge, notes.txt, zz");
  assert.equal(await store.purgeTag("t"), 1);
  await store.clear();
  for (const key of ["truncated", "bad-magic", "long-key", "forged", "huge"])
    assert.ok(existsSync(pathOf(root, key)), key);
  assert.ok(existsSync(join(root, "notes.txt")));
  assert.equal((await store.stats()).entries, 0);
});

test("an expired file is a miss and is deleted", async () => {
  const root = tempDir();
  const store = openStore(`file://${root}`);
  await store.set("short", bytes("v"), 30);
  assert.ok(existsSync(pathOf(root, "short")));
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(await store.get("short"), undefined);
  assert.ok(!existsSync(pathOf(root, "short")));
});

test("capacity: past it the oldest files go until under 90%", async () => {
  const root = tempDir();
  const store = openStore(`file://${root}?capacity=100K`);
  for (let i = 0; i < 300; i++) await store.set(`k${i}`, new Uint8Array(1000));
  const stats = await store.stats();
  assert.ok(stats.bytes <= 100 << 10, `${stats.bytes} bytes past the 100K capacity`);
  assert.ok(stats.entries > 50, `only ${stats.entries} files left`);
  assert.notEqual(await store.get("k299"), undefined, "the newest file was evicted");
  assert.equal(await store.get("k0"), undefined, "the oldest file is still there");
});

/** The process's umask, from a file created asking for every bit. */
function umask(dir: string): number {
  const probe = join(dir, ".umask-probe");
  writeFileSync(probe, "", { mode: 0o777 });
  const mask = 0o777 & ~statSync(probe).mode;
  rmSync(probe);
  return mask;
}

const modeOf = (path: string): number => statSync(path).mode & 0o7777;

test("files are created 0600 and directories 0700 unless mode= says otherwise (the umask may narrow them)", async () => {
  const parent = tempDir();
  const mask = umask(parent);
  for (const [query, file, dir] of [
    ["", 0o600, 0o700],
    ["?mode=0640", 0o640, 0o750],
    ["?mode=644", 0o644, 0o755],
    ["?mode=0660", 0o660, 0o770],
  ] as const) {
    const root = join(parent, `root${file.toString(8)}`);
    const store = openStore(`file://${root}${query}`);
    await store.set("k", bytes("v"));
    assert.equal(await store.add("locked", bytes("v")), true); // creates the shard's .lock
    const path = pathOf(root, "k");
    const lock = join(pathOf(root, "locked"), "..", ".lock");
    assert.equal(modeOf(path), file & ~mask, `${query}: a value file`);
    assert.equal(modeOf(lock), file & ~mask, `${query}: a lock file`);
    for (const d of [join(path, ".."), join(path, "..", ".."), root])
      assert.equal(modeOf(d), dir & ~mask, `${query}: ${d}`);
  }
});

test("mode= is three or four octal digits of permission bits that let the owner read and write", () => {
  const root = tempDir();
  for (const bad of ["0400", "0200", "0000", "4600", "1700", "600a", "60", "00600", "-600", "0o600", ""])
    assert.throws(() => openStore(`file://${root}?mode=${bad}`), UrlError, bad);
  assert.equal((openStore(`file://${root}?mode=0600`) as FileStore).fileMode, 0o600);
  assert.equal((openStore(`file://${root}?mode=0777`) as FileStore).dirMode, 0o777);
});

test("a link in any component below the root is never followed, by any operation; the root may be a link", async () => {
  const root = tempDir();
  const outside = tempDir();
  const elsewhere = new FileStore(outside);
  const now = Date.now();
  // Genuine entries outside the root: "second" under a linked second-level shard, "expired" (past its expiry, which
  // a read would delete) at a linked entry name, and "lockless" whose shard's .lock is a link.
  for (const key of ["second", "expired", "lockless"]) await elsewhere.set(key, bytes(`secret ${key}`));
  const hSecond = hashName("second");
  mkdirSync(join(root, hSecond.slice(0, 2)), { recursive: true });
  symlinkSync(
    join(outside, hSecond.slice(0, 2), hSecond.slice(2, 4)),
    join(root, hSecond.slice(0, 2), hSecond.slice(2, 4)),
  );
  const expiredFile = readFileSync(pathOf(outside, "expired"));
  expiredFile.writeBigUInt64LE(BigInt(now - 5_000), 4); // the file's own expiry, past: a read would delete it
  writeFileSync(pathOf(outside, "expired"), expiredFile);
  mkdirSync(join(pathOf(root, "expired"), ".."), { recursive: true });
  symlinkSync(pathOf(outside, "expired"), pathOf(root, "expired"));
  const lockTarget = join(outside, "lock-target");
  writeFileSync(lockTarget, "not a lock");
  mkdirSync(join(pathOf(root, "lockless"), ".."), { recursive: true });
  symlinkSync(lockTarget, join(pathOf(root, "lockless"), "..", ".lock"));
  const before = readFileSync(pathOf(outside, "second"));

  const store = openStore(`file://${root}?capacity=1K`) as FileStore;
  const server = (e: StoreError) => e.kind === "server";
  assert.equal(await store.get("second"), undefined);
  assert.deepEqual(await store.getMany(["second", "expired"]), [undefined, undefined]);
  assert.equal(await store.get("expired"), undefined, "a link is a miss, and the expired target is not deleted");
  await assert.rejects(store.set("second", bytes("mine")), server);
  await assert.rejects(store.add("second", bytes("mine")), server);
  await assert.rejects(store.incr("second", 1), server);
  await assert.rejects(store.add("lockless", bytes("mine")), server, "the .lock link is not opened");
  // deletes meet a link as a missing key: nothing removed
  assert.equal(await store.deleteIf("second", bytes("secret second")), false);
  assert.equal(await store.deleteIf("expired", bytes("v")), false);
  assert.equal(await store.delete("second"), false);
  assert.equal(await store.deleteMany(["second", "expired"]), 0);
  // capacity: writes past 1K evict the oldest files, and never one behind a link
  for (let i = 0; i < 20; i++) await store.set(`filler${i}`, new Uint8Array(200));
  const { entries, bytes: used } = await store.stats();
  assert.ok(used <= 1024 && entries < 20, `evicted down to the capacity: ${entries} files, ${used} bytes`);
  assert.equal(await store.purgePrefix(""), entries);
  assert.equal(await store.purgeTag("any"), 0);
  await store.clear();
  assert.ok((await store.stats()).foreignFiles >= 2, "the links are counted as foreign");

  assert.deepEqual(readFileSync(pathOf(outside, "second")), before, "the linked shard's file was touched");
  assert.ok(existsSync(pathOf(outside, "expired")), "the expired target was deleted through the link");
  assert.equal(readFileSync(lockTarget, "utf8"), "not a lock");
  assert.ok(lstatSync(pathOf(root, "expired")).isSymbolicLink());
  for (const key of ["second", "lockless"]) assert.deepEqual(await elsewhere.get(key), bytes(`secret ${key}`));
  assert.ok(!existsSync(join(outside, hSecond.slice(0, 2), hSecond.slice(2, 4), hashName("mine"))));

  // The root itself may be a link (an operator moving the cache to another disk): followed.
  const linkedRoot = join(tempDir(), "cache");
  symlinkSync(outside, linkedRoot);
  assert.deepEqual(await openStore(`file://${linkedRoot}`).get("second"), bytes("secret second"));
});

test("file:// URLs: a directory is required, unknown options are refused", () => {
  assert.throws(() => openStore("file://"), /needs a directory/);
  assert.throws(() => openStore("file://host/dir"), /takes a path/);
  assert.throws(() => openStore(`file://${tempDir()}?timeout=1s`), /unknown option timeout/);
});
