// hostile_keys.json (spec/vectors/README.md; STORES.md §2, "Wire bytes are the checked bytes"; issue 32 finding 1):
// every class of hostile key on every store the README names, opened from its URL without a prefix, and for the
// stored ones a raw probe of memcached, Redis or the file tree with the wire bytes (raw_probe.ts), so a store that
// checks one string and writes another (latin1, a length in code units, a replacement character) fails here.
//
// TypeScript strings are UTF-16, so the key is built from `key_utf16` (lone surrogates included: the string holds
// them, and the store must refuse it). A case without `key_utf16` (bytes that are not UTF-8 and not generalized UTF-8
// of any code units) cannot be a JavaScript string, and the Store API takes keys as strings only: it is refused by
// the type. The runner still counts it and, for a JavaScript caller that passes bytes anyway, hands every operation
// the key's bytes as a Buffer and requires the store's invalid_key error, with nothing sent (the sentinel intact).

import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bytesEqual, fromHex, toHex, utf8 } from "../../src/bytes.js";
import { openStore, type Store, StoreError } from "../../src/stores/index.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, get, list, section, str } from "./common.js";
import { memcachedFlush, memcachedGet, redisDbsize, redisFlush, redisGet } from "./raw_probe.js";

const STORES = ["memory", "file", "sqlite", "memcached", "redis"] as const;
type StoreKind = (typeof STORES)[number];

/** The address a variable names, or an error that says which variable is missing (the case then fails). */
export function serverFrom(variable: string): string {
  const address = process.env[variable];
  if (address === undefined || address === "")
    throw new Error(`${variable} is not set: the address of a server this runner may flush (spec/vectors/README.md)`);
  return address;
}

interface Opened {
  store: Store;
  /** memcached's or Redis's address, or the file store's root. */
  where: string;
  done: () => Promise<void>;
}

async function open(kind: StoreKind): Promise<Opened> {
  if (kind === "memcached" || kind === "redis") {
    const where = serverFrom(kind === "memcached" ? "LARDER_CONFORMANCE_MEMCACHED" : "LARDER_CONFORMANCE_REDIS");
    const store = openStore(`${kind}://${where}`);
    return { store, where, done: () => store.close() };
  }
  if (kind === "memory") {
    const store = openStore("memory://");
    return { store, where: "", done: () => store.close() };
  }
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-hostile-"));
  const store = openStore(kind === "file" ? `file://${dir}` : `sqlite://${join(dir, "hostile.db")}`);
  return {
    store,
    where: dir,
    done: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The file the store must have made for `wire` (STORES.md §7), and the key its header names, or undefined. */
function fileKey(root: string, wire: Uint8Array): Uint8Array | undefined {
  const h = createHash("sha256").update(wire).digest("hex");
  const path = join(root, h.slice(0, 2), h.slice(2, 4), h);
  try {
    statSync(path);
  } catch {
    return undefined;
  }
  const data = readFileSync(path);
  assert(data.subarray(0, 4).toString("latin1") === "LDR1", `${path} does not start with LDR1`);
  const length = data.readUInt16LE(12);
  return new Uint8Array(data.subarray(14, 14 + length));
}

/** What is at `wire` on the server or under the root, read raw; undefined when nothing is. */
async function probe(kind: StoreKind, where: string, wire: Uint8Array): Promise<Uint8Array | undefined> {
  if (kind === "memcached") return memcachedGet(where, wire);
  if (kind === "redis") return redisGet(where, wire);
  return fileKey(where, wire);
}

async function rejectsInvalidKey(what: string, run: () => Promise<unknown>): Promise<void> {
  let caught: unknown;
  try {
    await run();
  } catch (e) {
    caught = e;
  }
  assert(caught !== undefined, `${what} succeeded`);
  assert(
    caught instanceof StoreError && caught.kind === "invalid_key",
    `${what}: ${caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught)}, not invalid_key`,
  );
}

/** An assertion's message, or any other error's name and message. */
function described(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  return e.name === "AssertionError" ? e.message : `${e.name}: ${e.message}`;
}

export function hostileKeyCases(document: Value): Case[] {
  const entry = fromHex(str(get(document, "entry_hex"), "entry_hex"));
  const sentinel = get(document, "sentinel");
  const sentinelKey = str(get(sentinel, "key"), "sentinel.key");
  const sentinelValue = utf8(str(get(sentinel, "value"), "sentinel.value"));
  const out: Case[] = [];
  for (const c of section(document, "cases")) {
    const name = str(get(c, "name"), "name");
    const keyHex = str(get(c, "key_hex"), "key_hex");
    const units = get(c, "key_utf16");
    // Without key_utf16 the key is no JavaScript string: the bytes, for the untyped caller (see the top).
    const key =
      units === undefined
        ? (Buffer.from(fromHex(keyHex)) as unknown as string)
        : String.fromCharCode(...list(units, "key_utf16").map((u) => u as number));
    const outcome = str(get(c, "outcome"), "outcome");
    if (outcome !== "refused" && outcome !== "stored") throw new TypeError(`${name}: outcome ${outcome}`);
    if (outcome === "stored" && units === undefined) throw new TypeError(`${name}: stored without key_utf16`);
    const wireHex = get(c, "wire_hex");
    const wire = outcome === "stored" ? fromHex(str(wireHex, "wire_hex")) : new Uint8Array();
    const onStore = async (kind: StoreKind): Promise<void> => {
      const remote = kind === "memcached" || kind === "redis";
      const opened = await open(kind);
      const { store, where } = opened;
      try {
        if (kind === "memcached") await memcachedFlush(where);
        if (kind === "redis") await redisFlush(where);
        if (remote) await store.set(sentinelKey, sentinelValue);
        if (outcome === "refused") {
          await rejectsInvalidKey("get", () => store.get(key));
          await rejectsInvalidKey("get_many", () => store.getMany([key]));
          await rejectsInvalidKey("set", () => store.set(key, entry));
          await rejectsInvalidKey("add", () => store.add(key, entry));
          await rejectsInvalidKey("delete", () => store.delete(key));
          if (keyHex !== "") await rejectsInvalidKey("purge_prefix", () => store.purgePrefix(key));
        } else {
          await store.set(key, entry);
          const got = await store.get(key);
          assert(got !== undefined && bytesEqual(got, entry), `get answered ${got && toHex(got)}`);
          if (kind === "memory" || kind === "sqlite") {
            assert((await store.delete(key)) === true, "delete did not delete");
            assert((await store.get(key)) === undefined, "get after delete is not a miss");
          } else {
            const raw = await probe(kind, where, wire);
            const expected = kind === "file" ? wire : entry;
            assert(
              raw !== undefined && bytesEqual(raw, expected),
              raw === undefined
                ? `the raw probe finds nothing at the wire bytes ${toHex(wire)}`
                : `the raw probe at the wire bytes found ${toHex(raw).slice(0, 120)}`,
            );
            if (kind === "redis") {
              const size = await redisDbsize(where);
              assert(size === 2, `DBSIZE is ${size}, not 2 (the sentinel and the key)`);
            }
            assert((await store.delete(key)) === true, "delete did not delete");
            const after = await probe(kind, where, wire);
            assert(after === undefined, "the raw probe still finds the key after delete");
          }
        }
        if (remote) {
          const s =
            kind === "memcached"
              ? await memcachedGet(where, utf8(sentinelKey))
              : await redisGet(where, utf8(sentinelKey));
          assert(
            s !== undefined && bytesEqual(s, sentinelValue),
            `the sentinel is ${s === undefined ? "gone" : toHex(s)}`,
          );
          if (kind === "redis" && outcome === "refused") {
            const size = await redisDbsize(where);
            assert(size === 1, `DBSIZE is ${size}, not 1 (the sentinel only)`);
          }
        }
      } finally {
        await opened.done();
      }
    };
    // One case per entry of the file (spec/vectors/README.md): every store is tried, and a failure names each store
    // that failed and what it got.
    out.push({
      name,
      check: async () => {
        const failures: string[] = [];
        for (const kind of STORES) {
          try {
            await onStore(kind);
          } catch (e) {
            failures.push(`${kind}: ${described(e)}`);
          }
        }
        assert(failures.length === 0, failures.join("; "));
      },
    });
  }
  return out;
}
