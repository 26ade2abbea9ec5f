// ring.json and stores.json (STORES.md §2, §4.2): the ketama continuum and the server of each key; stored and
// internal keys; the keys every store refuses, and those at the edge of the rule it accepts.

import { fromHex, utf8OrUndefined } from "../../src/bytes.js";
import { internalKey, keyProblem, prefixProblem, storedKey } from "../../src/keys.js";
import { keyHash, Ring } from "../../src/ring.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, num, section, show, str } from "./common.js";

export function ringCases(document: Value): Case[] {
  return each(section(document, "cases"), checkRing);
}

export function storeCases(document: Value): Case[] {
  return section(document, "cases").map((c) => {
    const kind = str(get(c, "kind"), "kind");
    const name = kind === "refused" || kind === "accepted" ? get(c, "name") : get(c, "stored_key");
    return { name: `${kind}/${str(name, "name")}`, check: () => checkStoreKey(c) };
  });
}

function checkRing(c: Value): void {
  const servers = list(get(c, "servers"), "servers").map((s) => ({
    host: str(get(s, "host"), "host"),
    port: num(get(s, "port"), "port"),
    weight: num(get(s, "weight"), "weight"),
  }));
  const ejected = new Set(list(get(c, "ejected") ?? [], "ejected"));
  const ring = new Ring(servers, (i) => !ejected.has(i));
  assert(ring.points.length === get(c, "points"), `${ring.points.length} points`);
  const first = list(get(c, "first_points"), "first_points");
  assert(show(ring.points.slice(0, 8)) === show(first), `first points ${show(ring.points.slice(0, 8))}`);
  for (const k of list(get(c, "keys"), "keys")) {
    const key = str(get(k, "key"), "key");
    assert(keyHash(key) === get(k, "hash"), `hash of ${key}: ${keyHash(key)}`);
    assert(ring.serverFor(key) === get(k, "server"), `server of ${key}: ${ring.serverFor(key)}`);
  }
}

function keyOf(c: Value): string {
  const key = utf8OrUndefined(fromHex(str(get(c, "key_hex"), "key_hex")));
  if (key === undefined) throw new TypeError("key_hex is not UTF-8");
  return key;
}

function checkStoreKey(c: Value): void {
  const kind = get(c, "kind");
  if (kind === "stored") {
    const key = str(get(c, "key"), "key");
    const got = storedKey(str(get(c, "prefix"), "prefix"), key);
    assert(got === get(c, "stored_key"), got);
    assert(keyProblem(key) === undefined, String(keyProblem(key)));
  } else if (kind === "internal") {
    const got = internalKey(
      str(get(c, "prefix"), "prefix"),
      str(get(c, "purpose"), "purpose"),
      str(get(c, "name"), "name"),
    );
    assert(got === get(c, "stored_key"), got);
    assert(keyProblem(got) === undefined, "larder's own keys pass the rule they impose");
  } else if (kind === "refused") {
    const key = keyOf(c);
    assert(keyProblem(key) !== undefined, "accepted");
    assert(prefixProblem(key) !== undefined || key === "", "the empty prefix is allowed, the empty key is not");
  } else if (kind === "accepted") {
    const key = keyOf(c);
    assert(keyProblem(key) === undefined, String(keyProblem(key)));
    assert(prefixProblem(key) === undefined, String(prefixProblem(key)));
  } else {
    throw new Error(`unknown kind ${String(kind)}`);
  }
}
