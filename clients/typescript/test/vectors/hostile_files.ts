// hostile_files.json (spec/vectors/README.md; STORES.md §7; issue 32 findings 2 and 6): a hostile directory under
// the file store. For each case: fresh ROOT and OUTSIDE, `hostile_tree.py plant`, the file store opened from
// `file://ROOT?url_query` (openStore, as an app opens it), the case's operations in order, each within 5 s, then
// `hostile_tree.py check`, which says whether anything planted was read, changed, followed or deleted and whether
// the files the store made have the case's modes.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { bytesEqual, fromHex, toHex } from "../../src/bytes.js";
import { openStore, type Store, StoreError, UrlError } from "../../src/stores/index.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, readVectorText, str } from "./common.js";

const OPERATION_MS = 5000;

/** `entry_hex` of hostile_keys.json beside `path` (the value every write of these cases stores). */
export function siblingEntry(path: string): Uint8Array {
  const keys = readVectorText(readFileSync(join(dirname(path), "hostile_keys.json"), "utf8"));
  return fromHex(str(get(keys, "entry_hex"), "hostile_keys.json entry_hex"));
}

function tree(action: "plant" | "check", script: string, name: string, root: string, outside: string): void {
  const r = spawnSync("python3", [script, action, name, root, outside], { encoding: "utf8", timeout: 60_000 });
  if (r.error !== undefined) throw new Error(`hostile_tree.py ${action}: ${r.error.message}`);
  assert(r.status === 0, `hostile_tree.py ${action} ${name}: ${(r.stderr || r.stdout).trim().split("\n").join(" | ")}`);
}

/** `run` within OPERATION_MS: its result, or the error it threw (a hang is a failure of its own). */
async function bounded(what: string, run: () => Promise<unknown>): Promise<{ value?: unknown; error?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not return within ${OPERATION_MS} ms`)), OPERATION_MS);
  });
  try {
    return { value: await Promise.race([run(), late]) };
  } catch (error) {
    if (error instanceof Error && error.message.endsWith(`within ${OPERATION_MS} ms`)) throw error;
    return { error };
  } finally {
    clearTimeout(timer);
  }
}

function described(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

async function operate(store: Store, op: Value, entry: Uint8Array): Promise<void> {
  const kind = str(get(op, "op"), "op");
  const expect = str(get(op, "expect"), "expect");
  const key = get(op, "key") === undefined ? "" : str(get(op, "key"), "key");
  const what = `${kind}${key ? ` ${key}` : ""} (expect ${expect})`;
  const calls: Record<string, () => Promise<unknown>> = {
    get: () => store.get(key),
    get_many: () => store.getMany([key]),
    set: () => store.set(key, entry),
    add: () => store.add(key, entry),
    delete: () => store.delete(key),
    delete_if: () => store.deleteIf(key, entry),
    purge_prefix: () => store.purgePrefix(str(get(op, "prefix"), "prefix")),
    purge_tag: () => store.purgeTag(str(get(op, "tag"), "tag")),
  };
  const call = calls[kind];
  if (call === undefined) throw new TypeError(`unknown operation ${kind}`);
  const { value, error } = await bounded(what, call);
  if (expect === "error") {
    assert(error !== undefined, `${what} succeeded`);
    assert(
      error instanceof StoreError && error.kind !== "invalid_key",
      `${what}: ${described(error)} is not the store's own error`,
    );
    return;
  }
  assert(error === undefined, `${what}: ${described(error)}`);
  const one = kind === "get_many" ? (value as Array<Uint8Array | undefined>)[0] : value;
  switch (expect) {
    case "miss":
      assert(one === undefined, `${what} answered ${one instanceof Uint8Array ? toHex(one).slice(0, 80) : one}`);
      break;
    case "hit":
      assert(
        one instanceof Uint8Array && bytesEqual(one, entry),
        `${what} answered ${String(one && toHex(one as Uint8Array))}`,
      );
      break;
    case "ok":
      if (kind === "add") assert(value === true, `${what} answered ${String(value)}`);
      break;
    case "deleted":
      assert(value === true, `${what} answered ${String(value)}`);
      break;
    case "noop":
      assert(value === false, `${what} answered ${String(value)}`);
      break;
    default:
      throw new TypeError(`unknown expectation ${expect}`);
  }
}

async function check(c: Value, script: string, entry: Uint8Array): Promise<void> {
  const name = str(get(c, "name"), "name");
  const root = mkdtempSync(join(tmpdir(), "larder-ts-root-"));
  const outside = mkdtempSync(join(tmpdir(), "larder-ts-outside-"));
  let store: Store | undefined;
  try {
    tree("plant", script, name, root, outside);
    const query = str(get(c, "url_query"), "url_query");
    const url = `file://${root}${query ? `?${query}` : ""}`;
    const operations = list(get(c, "operations"), "operations");
    const opening = operations[0] !== undefined && get(operations[0], "op") === "open" ? operations[0] : undefined;
    let openError: unknown;
    try {
      store = openStore(url);
    } catch (e) {
      openError = e;
    }
    if (opening !== undefined) {
      const expect = str(get(opening, "expect"), "expect");
      if (expect === "url_error")
        assert(
          openError instanceof UrlError,
          `open ${url}: ${openError === undefined ? "opened" : described(openError)}`,
        );
      else assert(openError === undefined, `open ${url}: ${described(openError)}`);
    } else assert(openError === undefined, `open ${url}: ${described(openError)}`);
    if (store !== undefined)
      for (const op of operations.slice(opening === undefined ? 0 : 1)) await operate(store, op, entry);
    await store?.close();
    store = undefined;
    tree("check", script, name, root, outside);
  } finally {
    await store?.close().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  }
}

export function hostileFileCases(document: Value, path: string): Case[] {
  const script = join(dirname(path), "hostile_tree.py");
  let entry: Uint8Array | undefined;
  const entryOf = (): Uint8Array => {
    if (entry === undefined) entry = siblingEntry(path);
    return entry;
  };
  return each(list(get(document, "cases"), "cases"), (c) => check(c, script, entryOf()));
}
