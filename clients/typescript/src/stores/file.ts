// `file:///var/cache/larder?capacity=10G` (spec/STORES.md §7): one file per key under <root>/<h[0..2]>/<h[2..4]>/<h>
// (h = hex SHA-256 of the stored key), each file `LDR1`, the expiry (u64 LE ms, 0 = never), the key's length (u16
// LE) and the key, then the value. The same directory is shared with the Rust, Python, Ruby and Go stores.
//
// Writes go to `.<h>.<random>.tmp` (created exclusively, so never through a link) renamed over the final name: a
// reader sees a whole file or none. `add`, `incr` and `deleteIf` hold libc's `flock` on the shard's `.lock`
// (through koffi, loaded only here: ffi.ts): tried at once, else waited for on one of libuv's threads (never on
// Node's event loop), at most LOCK_WAIT_MS.
// The store deletes only files it wrote, and follows no link below the root (STORES.md §7): each shard directory is
// lstat-checked before it is used and files are opened with O_NOFOLLOW, so a link in any component is a miss for a
// read, a no-op for a delete and an error for a write (a link at an entry's name is not replaced), and the link and
// its target are left untouched; scans (capacity, purges, clear, stats) descend into no link and count, evict or
// purge only regular files named <64 hex> in their <2 hex>/<2 hex> shard that start with `LDR1`, whose key length
// fits and whose key hashes to the name. Everything else is foreign: left alone and counted in stats. The root itself
// may be a link. Files are created with the URL's `mode` (default 0600: a cache holds private pages), directories
// with it plus a search bit wherever it has a read bit (0700); the umask may narrow both.

import { createHash, randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  promises as fs,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  read,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { utf8, utf8OrUndefined } from "../bytes.js";
import { storedKey } from "../keys.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTag,
  checkTtl,
  counterValue,
  emptyStats,
  entryTags,
  expiresAtMs,
  parseCounter,
  type Store,
  type StoreStats,
  saturate,
} from "./base.js";
import { NotACounter, ServerError, StoreTimeout, TooLarge } from "./errors.js";
import { type Libc, LOCK_EX, LOCK_NB, loadLibc } from "./ffi.js";
import type { StoreUrl } from "./url.js";

const MAGIC = Buffer.from("LDR1", "latin1");
const HEADER = 14;
/** The format's default max_size (64 MiB), as Go's and Rust's file stores. */
const MAX_VALUE = 64 << 20;
/** No file of this store is longer: a longer one is foreign and never read whole. */
const MAX_FILE = HEADER + 0xffff + MAX_VALUE;
const RESCAN_MS = 60_000;
/** The longest `add`/`incr`/`deleteIf` waits for another writer's flock (SQLite's busy timeout elsewhere). */
export const LOCK_WAIT_MS = 5_000;
const EINTR = 4;
const EWOULDBLOCK = 11;
const PARALLEL = 16;
/** Blocking flock calls on libuv's worker threads at once, in this process (the pool has 4 by default). */
const BLOCKED_FLOCKS = 2;
let blockedFlocks = 0;
/** Reads and writes longer than this go through libuv's threads; shorter ones (and every metadata call) are made
 * at once: a few microseconds of a local file system each, where a round trip through the thread pool costs tens. */
const LARGE = 256 << 10;

const HEX2 = /^[0-9a-f]{2}$/;
const HEX64 = /^[0-9a-f]{64}$/;

export interface FileStoreStats extends StoreStats {
  /** Files and directories under the root that are not this store's (left alone, STORES.md §7). */
  foreignFiles: number;
}

export interface FileOptions {
  prefix?: string;
  /** Bytes of all files (0 = unbounded). */
  capacity?: number;
  /** Permission bits of the files the store creates (default 0o600); its directories get a search bit wherever this
   * has a read bit. The owner must be able to read and write. */
  mode?: number;
}

/** The default `mode`: only the owner reads a cache of private pages. */
export const DEFAULT_MODE = 0o600;

/** Why `mode` cannot be a file store's mode, or undefined: permission bits only, the owner reading and writing. */
export function modeProblem(mode: number): string | undefined {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777)
    return "a mode has permission bits only (no set-user-ID, set-group-ID or sticky bit)";
  if ((mode & 0o600) !== 0o600) return "a mode lets the owner read and write (0600 at least)";
  return undefined;
}

/** `mode=0640`: three or four octal digits, checked by modeProblem. */
export function parseMode(text: string): number {
  if (!/^[0-7]{3,4}$/.test(text))
    throw new RangeError(`mode=${JSON.stringify(text)} is not three or four octal digits`);
  const mode = Number.parseInt(text, 8);
  const problem = modeProblem(mode);
  if (problem !== undefined) throw new RangeError(`mode=${text}: ${problem}`);
  return mode;
}

/** The mode of a directory the store creates for files of `mode`: a search bit wherever it has a read bit. */
export function directoryMode(mode: number): number {
  return mode | ((mode & 0o444) >> 2);
}

/** One file of the store, as read and checked. */
interface OwnFile {
  path: string;
  key: string;
  expires: number;
  /** Absent when only the header was read. */
  value: Uint8Array | undefined;
  size: number;
  mtimeMs: number;
}

export function hashName(stored: string): string {
  return createHash("sha256").update(stored, "utf8").digest("hex");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function errnoCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

/** Reads `path` without following a link and parses it; undefined when it is missing or not a file of this store
 * (not regular, too long, no magic, a key that does not fit or is not UTF-8). Without `wantValue` only the header
 * and key are read. */
async function readFile(path: string, wantValue: boolean): Promise<OwnFile | undefined> {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO planted under the name must not block the open.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if (["ENOENT", "ELOOP", "ENOTDIR", "ENXIO", "EISDIR"].includes(errnoCode(e) ?? "")) return undefined;
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size < HEADER || st.size > MAX_FILE) return undefined;
    const want = wantValue ? st.size : Math.min(st.size, HEADER + 0xffff);
    const data = Buffer.allocUnsafe(want);
    let got = 0;
    while (got < want) {
      const bytesRead =
        want - got > LARGE ? await readAsync(fd, data, got, want - got) : readSync(fd, data, got, want - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    if (got < HEADER || !data.subarray(0, 4).equals(MAGIC)) return undefined;
    const keyLength = data.readUInt16LE(12);
    if (HEADER + keyLength > got) return undefined;
    const key = utf8OrUndefined(data.subarray(HEADER, HEADER + keyLength));
    if (key === undefined) return undefined;
    return {
      path,
      key,
      expires: Number(data.readBigUInt64LE(4)),
      value: wantValue ? new Uint8Array(data.subarray(HEADER + keyLength, got)) : undefined,
      size: st.size,
      mtimeMs: st.mtimeMs,
    };
  } finally {
    closeSync(fd);
  }
}

function readAsync(fd: number, into: Buffer, at: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, into, at, length, at, (e, n) => (e ? reject(e) : resolve(n))));
}

async function entries(dir: string): Promise<import("node:fs").Dirent[]> {
  try {
    return await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

/** Runs `work` on each item, at most PARALLEL at once, results in order. */
async function eachLimited<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let at = 0; at < items.length; at += PARALLEL)
    out.push(...(await Promise.all(items.slice(at, at + PARALLEL).map(work))));
  return out;
}

export class FileStore implements Store {
  readonly backend = "file";
  readonly root: string;
  readonly prefix: string;
  readonly capacity: number;
  /** Of the files the store creates, and of its directories. */
  readonly fileMode: number;
  readonly dirMode: number;
  private total = 0;
  private scannedAt = 0;
  private evicting = false;

  constructor(root: string, o: FileOptions = {}) {
    this.root = root;
    this.prefix = o.prefix ?? "";
    this.capacity = o.capacity ?? 0;
    this.fileMode = o.mode ?? DEFAULT_MODE;
    const problem = modeProblem(this.fileMode);
    if (problem !== undefined) throw new RangeError(problem);
    this.dirMode = directoryMode(this.fileMode);
    try {
      mkdirSync(root, { recursive: true, mode: this.dirMode });
    } catch (e) {
      throw this.error(`cannot create the directory: ${(e as Error).message}`);
    }
    // koffi is imported now, in the background; an add/incr/deleteIf reports a missing one (NativeUnavailable).
    loadLibc(this.backend).catch(() => {});
  }

  static fromUrl(url: StoreUrl): FileStore {
    url.noHosts();
    const prefix = url.take("prefix") ?? "";
    const capacity = url.takeSize("capacity", 0);
    const modeText = url.take("mode");
    url.finish();
    let mode = DEFAULT_MODE;
    if (modeText !== undefined) {
      try {
        mode = parseMode(modeText);
      } catch (e) {
        throw url.error(`option ${(e as Error).message}`);
      }
    }
    if (url.path.length < 2) throw url.error("file:// needs a directory: file:///var/cache/larder");
    try {
      checkPrefix("file", prefix);
    } catch (e) {
      throw url.error(`option prefix: ${(e as Error).message}`);
    }
    return new FileStore(url.path, { prefix, capacity, mode });
  }

  // ------------------------------------------------------------------------------------------------ layout

  private error(detail: string): ServerError {
    return new ServerError(this.backend, detail, this.root);
  }

  private key(key: string): string {
    return storedKey(this.prefix, checkKey(this.backend, key));
  }

  /** The shard directory of `name`; undefined when it is missing or is not a real directory (a link, a file),
   * unless `create`, which makes it or fails. */
  private shard(name: string, create: boolean): string | undefined {
    let dir = this.root;
    for (const part of [name.slice(0, 2), name.slice(2, 4)]) {
      dir = join(dir, part);
      let isDir: boolean;
      try {
        const st = lstatSync(dir, { throwIfNoEntry: false });
        if (st === undefined && create) {
          try {
            mkdirSync(dir, this.dirMode);
          } catch (e) {
            if (errnoCode(e) !== "EEXIST") throw e; // EEXIST: another writer made it meanwhile
          }
          isDir = lstatSync(dir).isDirectory();
        } else isDir = st?.isDirectory() ?? false;
      } catch (e) {
        throw this.error(`${dir}: ${(e as Error).message}`);
      }
      if (!isDir) {
        if (create) throw this.error(`${dir} is not a directory of this store (a link or a foreign file): not written`);
        return undefined;
      }
    }
    return dir;
  }

  /** The file of `stored` when it is this store's and live; an expired one is deleted. */
  private async readLive(stored: string, now: number): Promise<OwnFile | undefined> {
    const name = hashName(stored);
    const dir = this.shard(name, false);
    if (dir === undefined) return undefined;
    let file: OwnFile | undefined;
    try {
      file = await readFile(join(dir, name), true);
    } catch (e) {
      throw this.error(`${name}: ${(e as Error).message}`);
    }
    if (file === undefined || file.key !== stored) return undefined;
    if (file.expires !== 0 && file.expires <= now) {
      await this.unlink(file);
      return undefined;
    }
    return file;
  }

  private async unlink(file: OwnFile): Promise<boolean> {
    try {
      unlinkSync(file.path);
    } catch (e) {
      if (errnoCode(e) === "ENOENT") return false;
      throw this.error(`cannot delete ${file.path}: ${(e as Error).message}`);
    }
    this.total -= file.size;
    return true;
  }

  private async write(stored: string, value: Uint8Array, expires: number | undefined): Promise<void> {
    const name = hashName(stored);
    const key = utf8(stored);
    const data = Buffer.allocUnsafe(HEADER + key.length + value.length);
    MAGIC.copy(data, 0);
    data.writeBigUInt64LE(BigInt(expires ?? 0), 4);
    data.writeUInt16LE(key.length, 12);
    data.set(key, HEADER);
    data.set(value, HEADER + key.length);
    const dir = this.shard(name, true) as string;
    const path = join(dir, name);
    const temporary = join(dir, `.${name}.${randomBytes(8).toString("hex")}.tmp`);
    let old = 0;
    try {
      // A link at the entry's name is neither written through nor replaced: the write fails and leaves it.
      if (lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink())
        throw new Error(`${path} is a symbolic link, not a file of this store`);
      if (data.length > LARGE) await fs.writeFile(temporary, data, { flag: "wx", mode: this.fileMode });
      else writeFileSync(temporary, data, { flag: "wx", mode: this.fileMode });
      const st = lstatSync(path, { throwIfNoEntry: false });
      if (st?.isSymbolicLink()) throw new Error(`${path} is a symbolic link, not a file of this store`);
      if (st?.isFile()) old = st.size;
      renameSync(temporary, path);
    } catch (e) {
      try {
        unlinkSync(temporary);
      } catch {
        // never written, or already renamed
      }
      throw this.error(`cannot write ${name}: ${(e as Error).message}`);
    }
    this.total += data.length - old;
    await this.bound();
  }

  /** Deletes the file of `stored` if it is this store's; true if it held a live value. */
  private async remove(stored: string): Promise<boolean> {
    const found = await this.readLive(stored, Date.now());
    return found !== undefined && (await this.unlink(found));
  }

  /** Runs `work` holding the exclusive flock of the shard's `.lock` (released when the file is closed). */
  private async locked<T>(stored: string, work: () => Promise<T>): Promise<T> {
    const libc = await loadLibc(this.backend);
    const dir = this.shard(hashName(stored), true) as string;
    const lockPath = join(dir, ".lock");
    let fd: number;
    try {
      fd = openSync(
        lockPath,
        constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        this.fileMode,
      );
    } catch (e) {
      throw this.error(`cannot open ${lockPath}: ${(e as Error).message}`);
    }
    let owned = true; // false once a blocked flock call owns the descriptor (it closes it when it returns)
    try {
      if (!fstatSync(fd).isFile()) throw this.error(`${lockPath} is not a regular file`);
      if (libc.flock(fd, LOCK_EX | LOCK_NB) !== 0) {
        const errno = libc.errno();
        if (errno !== EWOULDBLOCK && errno !== EINTR) throw this.error(`flock ${lockPath}: errno ${errno}`);
        owned = false;
        await this.waitForLock(libc, fd, lockPath);
        owned = true;
      }
      return await work();
    } finally {
      if (owned) closeSync(fd);
    }
  }

  /** Waits for the flock another process holds: a blocking flock on one of libuv's threads, where the kernel wakes
   * it as it wakes the other languages' waiters (polling would lose to them), for at most LOCK_WAIT_MS. At most
   * BLOCKED_FLOCKS such calls run at once in the process, so a holder that never lets go can take no more of the
   * pool's threads than that; a call that outlives the wait keeps the descriptor and closes it (unlocking) when it
   * returns. On return the lock is held and the descriptor is the caller's again. */
  private async waitForLock(libc: Libc, fd: number, lockPath: string): Promise<void> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    const timeout = () => new StoreTimeout(this.backend, this.root, LOCK_WAIT_MS);
    while (blockedFlocks >= BLOCKED_FLOCKS) {
      if (Date.now() >= deadline) {
        closeSync(fd);
        throw timeout();
      }
      await sleep(5);
    }
    blockedFlocks++;
    // Whichever comes first, the lock or the deadline, decides; the other, later, finds `settled`.
    const outcome = await new Promise<"locked" | "failed" | "late">((resolve) => {
      let settled = false;
      const timer = setTimeout(
        () => {
          settled = true;
          resolve("late");
        },
        Math.max(0, deadline - Date.now()),
      );
      libc
        .flockInThread(fd, LOCK_EX)
        .catch(() => -1)
        .then((result) => {
          blockedFlocks--;
          if (settled) {
            closeSync(fd); // its waiter has gone: closing the descriptor lets the lock go
            return;
          }
          settled = true;
          clearTimeout(timer);
          resolve(result === 0 ? "locked" : "failed");
        });
    });
    if (outcome === "late") throw timeout();
    if (outcome === "failed") {
      closeSync(fd);
      throw this.error(`flock ${lockPath} failed`);
    }
  }

  // ------------------------------------------------------------------------------------------------- scans

  /** Visits this store's own files (see the top of the file) and returns how many foreign things it saw. */
  private async walk(wantValue: boolean, visit: (file: OwnFile) => Promise<void> | void): Promise<number> {
    let foreign = 0;
    for (const d1 of await entries(this.root)) {
      if (d1.name.startsWith(".")) continue;
      if (!d1.isDirectory() || !HEX2.test(d1.name)) {
        foreign++;
        continue;
      }
      const p1 = join(this.root, d1.name);
      for (const d2 of await entries(p1)) {
        if (d2.name.startsWith(".")) continue;
        if (!d2.isDirectory() || !HEX2.test(d2.name)) {
          foreign++;
          continue;
        }
        const p2 = join(p1, d2.name);
        const names: string[] = [];
        for (const f of await entries(p2)) {
          if (f.name.startsWith(".")) continue;
          if (!f.isFile() || !HEX64.test(f.name) || f.name.slice(0, 2) !== d1.name || f.name.slice(2, 4) !== d2.name)
            foreign++;
          else names.push(f.name);
        }
        const files = await eachLimited(names, (name) => readFile(join(p2, name), wantValue).catch(() => undefined));
        for (const [i, file] of files.entries()) {
          if (file === undefined || hashName(file.key) !== names[i]) foreign++;
          else await visit(file);
        }
      }
    }
    return foreign;
  }

  private async rescan(): Promise<void> {
    let total = 0;
    this.scannedAt = Date.now();
    await this.walk(false, (f) => {
      total += f.size;
    });
    this.total = total;
  }

  /** Past `capacity`, deletes the files with the oldest modification time until the total is under 90% of it. */
  private async bound(): Promise<void> {
    if (this.capacity === 0 || this.evicting) return;
    this.evicting = true;
    try {
      if (Date.now() - this.scannedAt > RESCAN_MS) await this.rescan();
      if (this.total <= this.capacity) return;
      const files: OwnFile[] = [];
      await this.walk(false, (f) => {
        files.push(f);
      });
      files.sort((a, b) => a.mtimeMs - b.mtimeMs || (a.path < b.path ? -1 : 1));
      this.total = files.reduce((sum, f) => sum + f.size, 0);
      for (const f of files) {
        if (this.total <= Math.floor((this.capacity * 9) / 10)) break;
        await this.unlink(f).catch(() => false);
      }
    } finally {
      this.evicting = false;
    }
  }

  /** Deletes this store's files whose key starts with `keyPrefix` (and, with `tag`, whose entry carries it); how
   * many held live values. */
  private async purge(keyPrefix: string, tag: string | undefined): Promise<number> {
    const now = Date.now();
    let removed = 0;
    await this.walk(tag !== undefined, async (f) => {
      if (!f.key.startsWith(keyPrefix)) return;
      if (tag !== undefined && !entryTags(f.value ?? new Uint8Array()).includes(tag)) return;
      if ((await this.unlink(f).catch(() => false)) && (f.expires === 0 || f.expires > now)) removed++;
    });
    return removed;
  }

  // ------------------------------------------------------------------------------------------------- Store

  maxValueBytes(): number {
    return MAX_VALUE;
  }

  private check(key: string, value: Uint8Array): void {
    if (value.length > MAX_VALUE) throw new TooLarge(this.backend, key, value.length, MAX_VALUE);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return (await this.readLive(this.key(key), Date.now()))?.value;
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    const stored = keys.map((k) => this.key(k));
    const now = Date.now();
    return eachLimited(stored, async (k) => (await this.readLive(k, now))?.value);
  }

  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    await this.setMany([[key, value]], ttlMs);
  }

  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    checkTtl(ttlMs);
    const batch = items.map(([k, v]): [string, Uint8Array] => [this.key(k), v]);
    for (const [k, v] of items) this.check(k, v);
    const now = Date.now();
    for (const [stored, value] of batch) {
      const expires = expiresAtMs(value, ttlMs, now);
      if (expires !== undefined && expires <= now) await this.remove(stored);
      else await this.write(stored, value, expires);
    }
  }

  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    checkTtl(ttlMs);
    const stored = this.key(key);
    this.check(key, value);
    const now = Date.now();
    const expires = expiresAtMs(value, ttlMs, now);
    if (expires !== undefined && expires <= now) return false;
    return this.locked(stored, async () => {
      if ((await this.readLive(stored, Date.now())) !== undefined) return false;
      await this.write(stored, value, expires);
      return true;
    });
  }

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    checkTtl(ttlMs);
    const stored = this.key(key);
    const d = BigInt(delta);
    return this.locked(stored, async () => {
      const now = Date.now();
      const current = await this.readLive(stored, now);
      if (current === undefined) {
        if (!create) return undefined;
        const n = saturate(d);
        await this.write(
          stored,
          utf8(n.toString()),
          ttlMs === undefined ? undefined : now + Math.max(1, Math.ceil(ttlMs)),
        );
        return counterValue(n);
      }
      const old = parseCounter(current.value ?? new Uint8Array());
      if (old === undefined) throw new NotACounter(this.backend, key);
      const n = saturate(old + d);
      await this.write(stored, utf8(n.toString()), current.expires || undefined);
      return counterValue(n);
    });
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.key(key);
    // No shard (or one that is a link): nothing of this store's to delete, and no lock to make there.
    if (this.shard(hashName(stored), false) === undefined) return false;
    return this.locked(stored, async () => {
      const current = await this.readLive(stored, Date.now());
      if (current?.value === undefined || !Buffer.from(current.value).equals(Buffer.from(expected))) return false;
      return this.unlink(current);
    });
  }

  async delete(key: string): Promise<boolean> {
    return this.remove(this.key(key));
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    const stored = keys.map((k) => this.key(k));
    return (await eachLimited(stored, (k) => this.remove(k))).filter(Boolean).length;
  }

  async clear(): Promise<void> {
    await this.purge(this.prefix, undefined);
  }

  async purgePrefix(prefix: string): Promise<number> {
    checkPrefix(this.backend, prefix);
    return this.purge(this.prefix ? storedKey(this.prefix, prefix) : prefix, undefined);
  }

  async purgeTag(tag: string): Promise<number> {
    checkTag(this.backend, tag);
    return this.purge(this.prefix, tag);
  }

  async stats(): Promise<FileStoreStats> {
    const now = Date.now();
    let entries = 0;
    let bytes = 0;
    const foreignFiles = await this.walk(false, (f) => {
      if (f.expires === 0 || f.expires > now) {
        entries++;
        bytes += f.size;
      }
    });
    return { ...emptyStats(), entries, bytes, capacityBytes: this.capacity, foreignFiles };
  }

  async close(): Promise<void> {}
}
