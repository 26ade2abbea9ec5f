// hostile_replies.json (spec/vectors/README.md; STORES.md §2, "Replies are hostile too"; issue 32 finding 4): every
// command of the memcached and Redis stores against larder-hostile ($LARDER_HOSTILE), one fresh server and one fresh
// store (opened from its URL) per operation: each fails with the store's own error (not invalid_key, not another
// exception, not a success) within the case's `within_ms` of the call.

import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { openStore, type Store, StoreError } from "../../src/stores/index.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, get, list, num, str } from "./common.js";
import { siblingEntry } from "./hostile_files.js";

/** A larder-hostile server: its address, and a stop that closes its standard input (it then exits). */
async function hostile(
  protocol: string,
  behaviour: string,
  args: string[],
): Promise<{ address: string; stop: () => Promise<void> }> {
  const binary = process.env.LARDER_HOSTILE;
  if (binary === undefined || binary === "")
    throw new Error("LARDER_HOSTILE is not set: the larder-hostile binary (cargo build -p larder-testkit --bins)");
  const child: ChildProcess = spawn(binary, [protocol, behaviour, ...args], { stdio: ["pipe", "pipe", "ignore"] });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.stdin?.end();
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  try {
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`larder-hostile ${protocol} ${behaviour} printed no address`)),
        10_000,
      );
      lines.once("line", (line) => {
        clearTimeout(timer);
        resolve(line.trim());
      });
      child.once("error", (e) => {
        clearTimeout(timer);
        reject(new Error(`larder-hostile did not start: ${e.message}`));
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`larder-hostile ${protocol} ${behaviour} exited (${code}) before listening`));
      });
    });
    return { address, stop };
  } catch (e) {
    await stop();
    throw e;
  } finally {
    lines.close();
  }
}

function operation(name: string, store: Store, entry: Uint8Array): () => Promise<unknown> {
  const calls: Record<string, () => Promise<unknown>> = {
    get: () => store.get("k1"),
    get_many: () => store.getMany(["k1", "k2", "k3"]),
    set: () => store.set("k1", entry),
    add: () => store.add("k1", entry),
    incr: () => store.incr("k1", 1),
    delete: () => store.delete("k1"),
    delete_if: () => store.deleteIf("k1", entry),
    purge_tag: () => store.purgeTag("t"),
    purge_prefix: () => store.purgePrefix("k"),
  };
  const call = calls[name];
  if (call === undefined) throw new TypeError(`unknown operation ${name}`);
  return call;
}

async function checkOperation(c: Value, name: string, entry: Uint8Array): Promise<void> {
  const protocol = str(get(c, "protocol"), "protocol");
  if (protocol !== "memcached" && protocol !== "redis") throw new TypeError(`protocol ${protocol}`);
  const behaviour = str(get(c, "behaviour"), "behaviour");
  const args = list(get(c, "server_args"), "server_args").map((a) => str(a, "server_args"));
  const query = str(get(c, "url_query"), "url_query");
  const withinMs = num(get(c, "within_ms"), "within_ms");
  const server = await hostile(protocol, behaviour, args);
  let store: Store | undefined;
  try {
    store = openStore(`${protocol}://${server.address}${query ? `?${query}` : ""}`);
    const call = operation(name, store, entry);
    const started = performance.now();
    let caught: unknown;
    let late: NodeJS.Timeout | undefined;
    try {
      // A hang is reported at twice the bound rather than waited out.
      await Promise.race([
        call(),
        new Promise((_, reject) => {
          late = setTimeout(() => reject(new Error(`no answer within ${2 * withinMs} ms`)), 2 * withinMs);
        }),
      ]);
    } catch (e) {
      caught = e;
    } finally {
      clearTimeout(late);
    }
    const took = Math.round(performance.now() - started);
    assert(caught !== undefined, `succeeded against ${behaviour}`);
    assert(
      caught instanceof StoreError && caught.kind !== "invalid_key",
      caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught),
    );
    assert(took <= withinMs, `failed after ${took} ms, not within ${withinMs} ms (${caught.message})`);
  } finally {
    // A store whose server never answers may not close cleanly: bounded, and not this case's verdict.
    if (store !== undefined)
      await Promise.race([store.close().catch(() => undefined), new Promise((r) => setTimeout(r, 2000).unref())]);
    await server.stop();
  }
}

/** Every operation of a vector case, each with its own server and store; a failure names each operation that
 * failed and what it got. */
async function check(c: Value, entry: Uint8Array): Promise<void> {
  const failures: string[] = [];
  for (const name of list(get(c, "operations"), "operations").map((o) => str(o, "operation"))) {
    try {
      await checkOperation(c, name, entry);
    } catch (e) {
      failures.push(`${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  assert(failures.length === 0, failures.join("; "));
}

/** One case per entry of the file (spec/vectors/README.md: `cases` counts the file's cases). */
export function hostileReplyCases(document: Value, path: string): Case[] {
  let entry: Uint8Array | undefined;
  const entryOf = (): Uint8Array => {
    if (entry === undefined) entry = siblingEntry(path);
    return entry;
  };
  return list(get(document, "cases"), "cases").map((c) => ({
    name: str(get(c, "name"), "name"),
    check: () => check(c, entryOf()),
  }));
}
