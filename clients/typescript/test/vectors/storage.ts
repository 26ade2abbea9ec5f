// storage.json (spec/HTTP.md §1): with each case's settings (rules_defaults with the case's rules), `storage`
// gives exactly the case's expected outcome; the file's shape (unique names, notes, known reasons, lowercase
// sorted Vary names) is a case of its own, `file-shape`, as in the other runners.

import { DEFAULT_RULES, type Rules, storage } from "../../src/http/storageRules.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, num, section, show, str } from "./common.js";

const REASONS = new Set([
  "method",
  "status",
  "no-store",
  "request-no-store",
  "private",
  "authorization",
  "set-cookie",
  "vary-star",
  "no-explicit-freshness",
]);

/** The front's setting names (stale_if_error_secs) as Rules' names (staleIfError). */
const SETTINGS: Record<string, keyof Rules> = {
  targeted_fields: "targetedFields",
  surrogate_control: "surrogateControl",
  heuristic_max_secs: "heuristicMax",
  cache_set_cookie: "cacheSetCookie",
  stale_while_revalidate_secs: "staleWhileRevalidate",
  stale_if_error_secs: "staleIfError",
  revalidation_window_secs: "revalidationWindow",
  honor_request_cache_control: "honorRequestCacheControl",
};

function toPlain(v: Value): unknown {
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [k, toPlain(x)]));
  if (Array.isArray(v)) return v.map(toPlain);
  return v;
}

export function rulesFor(defaults: Value, overrides: Value): Rules {
  const rules: Record<string, unknown> = { ...DEFAULT_RULES };
  for (const source of [defaults, overrides]) {
    if (!(source instanceof Map)) throw new TypeError("rules are a map");
    for (const [name, value] of source) {
      const key = SETTINGS[name as string];
      if (key === undefined) throw new Error(`unknown rule ${String(name)}`);
      rules[key] = toPlain(value);
    }
  }
  return rules as unknown as Rules;
}

function lines(v: Value): Array<[string, string]> {
  return list(v, "headers").map((line) => {
    const [n, x] = list(line, "line") as [Value, Value];
    return [str(n, "name"), str(x, "value")];
  });
}

export function decide(defaults: Value, c: Value): unknown {
  const request = get(c, "request");
  const response = get(c, "response");
  const plan = storage(
    rulesFor(defaults, get(c, "rules")),
    str(get(request, "method"), "method"),
    lines(get(request, "headers")),
    num(get(response, "status"), "status"),
    lines(get(response, "headers")),
    num(get(c, "request_time_ms"), "request_time_ms"),
    num(get(c, "response_time_ms"), "response_time_ms"),
  );
  if (!plan.stored) return { stored: false, reason: plan.reason };
  return {
    stored: true,
    fresh_ms: plan.freshMs,
    initial_age_ms: plan.initialAgeMs,
    keep_stale_ms: plan.keepStaleMs,
    vary: plan.vary,
  };
}

function sorted(o: unknown): string {
  return JSON.stringify(o, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v,
  );
}

export function cases(document: Value): Case[] {
  const defaults = get(document, "rules_defaults");
  if (!(defaults instanceof Map)) throw new TypeError("rules_defaults is not a map");
  const listed = section(document, "cases");
  return [
    { name: "file-shape", check: () => checkShape(listed) },
    ...each(listed, (c) => {
      const got = decide(defaults, c);
      const expected = toPlain(get(c, "expected"));
      assert(sorted(got) === sorted(expected), `expected ${show(expected)}, got ${show(got)}`);
    }),
  ];
}

function checkShape(listed: Value[]): void {
  const names = new Set<string>();
  for (const c of listed) {
    const name = str(get(c, "name"), "name");
    assert(!names.has(name), `${name} is not unique`);
    names.add(name);
    assert(typeof get(c, "note") === "string" && get(c, "note") !== "", `${name} has no note`);
    const expected = get(c, "expected");
    if (get(expected, "stored") === true) {
      const keys = [...(expected as Map<string, Value>).keys()].sort();
      assert(show(keys) === show(["fresh_ms", "initial_age_ms", "keep_stale_ms", "stored", "vary"]), name);
      const vary = list(get(expected, "vary"), "vary").map((v) => str(v, "vary"));
      const normal = [...new Set(vary)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      assert(show(vary) === show(normal), `${name}: vary is sorted and unique`);
      assert(
        vary.every((v) => v === v.toLowerCase()),
        `${name}: vary is lowercase`,
      );
    } else {
      assert(get(expected, "stored") === false, `${name}: stored is true or false`);
      assert(REASONS.has(str(get(expected, "reason"), "reason")), `${name}: unknown reason`);
    }
  }
}
