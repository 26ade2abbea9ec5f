// The TypeScript CLI (larder-ts encode|inspect|key) against the Rust binary on the same inputs: exit status and
// stdout byte for byte, one `larder: ` line on stderr for every error (spec/CLI.md). Every vector entry is
// inspected by both, in both output forms and as a terminal would see it.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { LARDER_BIN, REPO, TS_ROOT } from "./support/paths.js";

const CLI = join(TS_ROOT, "build", "src", "cli.js");

interface Ran {
  status: number;
  stdout: Buffer;
  stderr: string;
}

function run(command: string[], args: string[], stdin: Uint8Array | string, env: Record<string, string> = {}): Ran {
  const [exe, ...pre] = command as [string, ...string[]];
  const r = spawnSync(exe, [...pre, ...args], { input: stdin, env: { ...process.env, ...env }, timeout: 20_000 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr.toString("utf8") };
}

const ts = (args: string[], stdin: Uint8Array | string = "", env: Record<string, string> = {}): Ran =>
  run([process.execPath, CLI], args, stdin, env);
const rust = (args: string[], stdin: Uint8Array | string = "", env: Record<string, string> = {}): Ran =>
  run([LARDER_BIN], args, stdin, env);

function same(args: string[], stdin: Uint8Array | string = "", env: Record<string, string> = {}): Ran {
  const a = ts(args, stdin, env);
  const b = rust(args, stdin, env);
  assert.equal(a.status, b.status, `exit status of ${args.join(" ")}: ${a.stderr} / ${b.stderr}`);
  assert.deepEqual(a.stdout, b.stdout, `stdout of ${args.join(" ")}`);
  if (a.status !== 0) {
    assert.match(a.stderr, /^larder: [^\n]*\n$/, "one larder: line");
    assert.match(b.stderr, /^larder: /);
  }
  return a;
}

const rustMissing = !existsSync(LARDER_BIN) && process.env.LARDER_BIN === undefined;
const vectors = (file: string): Array<Record<string, unknown>> =>
  JSON.parse(readFileSync(join(REPO, "spec", "vectors", file), "utf8")).cases;

describe("CLI against the Rust binary", { skip: rustMissing ? `no ${LARDER_BIN}` : false }, () => {
  const encodes: Array<[string[], string | Uint8Array]> = [
    [["--created-at", "1700000000000", "--ttl", "60", "--version", "v1", "--tag", "user:7"], '{"id":7,"name":"Ada"}'],
    [["--serializer", "text"], "héllo\n"],
    [["--serializer", "text"], ""],
    [["--serializer", "raw"], Uint8Array.of(0xff, 0, 10)],
    [["--serializer", "text", "--json-input"], '"h\\u00e9llo"'],
    [["--serializer", "raw", "--json-input"], '{"$base64": "/wA="}'],
    [["--serializer", "msgpack"], "[1, 1.0, -0, 1e16, 1.5e-7, 18446744073709551615, -9223372036854775808, 0.1]"],
    [["--serializer", "json"], '{"b": [1, 2.5], "a": null}'],
    [["--stale", "30", "--ttl", "1"], '{"z": 1, "a": {"2": 1, "1": 2}, "dup": 1, "dup": 2}'],
    [
      ["--kind", "response"],
      '{"status": 301, "headers": [["location", "/new"], ["x-bin", {"$base64": "/w=="}]], "body": "moved"}',
    ],
    [["--threshold", "0"], JSON.stringify({ text: "x".repeat(3000) })],
    [["--version", ""], "null"],
    [["--serializer", "text"], Uint8Array.of(0xff)],
    [[], "[".repeat(101) + "]".repeat(101)],
    [["--serializer", "json"], "1e400"],
    [[], "18446744073709551616"],
    [[], "{not json"],
    [["--kind", "response", "--serializer", "json"], '{"status": 200}'],
    [["--kind", "response"], '{"status": 99}'],
  ];
  test("encode gives the same bytes (uncompressed) and statuses", () => {
    for (const [args, stdin] of encodes) {
      const created = args.includes("--created-at") ? [] : ["--created-at", "1700000000000"];
      same(["encode", "--compressor", "none", ...created, ...args], stdin);
    }
  });
  test("inspect of what each encodes is the same, in every form", () => {
    for (const [args, stdin] of encodes) {
      const created = args.includes("--created-at") ? [] : ["--created-at", "1700000000000"];
      const entry = rust(["encode", ...created, ...args], stdin);
      if (entry.status !== 0) continue;
      for (const form of [[], ["--json"], ["--body"]]) same(["inspect", ...form], entry.stdout);
      same(["inspect", "--body"], entry.stdout, { LARDER_FORCE_TTY: "1" });
    }
  });
  test("inspect of every valid vector entry", () => {
    for (const c of vectors("entries.json")) {
      const data = Buffer.from(c.entry_hex as string, "hex");
      for (const form of [[], ["--json"], ["--body"]]) same(["inspect", ...form], data);
      same(["inspect", "--body"], data, { LARDER_FORCE_TTY: "1" });
      same(["inspect", "--full"], data, { LARDER_FORCE_TTY: "1" });
    }
  });
  test("inspect of every invalid vector entry names the same error kind", () => {
    for (const c of vectors("invalid.json")) {
      const args = c.max_size === undefined ? ["inspect"] : ["inspect", "--max-size", String(c.max_size)];
      const r = same(args, Buffer.from(c.entry_hex as string, "hex"));
      assert.equal(r.status, 1);
      assert.ok(r.stderr.startsWith(`larder: invalid entry: ${c.error}: `), `${c.name}: ${r.stderr}`);
    }
  });
  test("long texts are cut on a terminal as the Rust binary cuts them", () => {
    const entry = rust(["encode", "--serializer", "text", "--created-at", "0"], "x".repeat(300)).stdout;
    same(["inspect"], entry, { LARDER_FORCE_TTY: "1" });
    same(["inspect", "--full"], entry, { LARDER_FORCE_TTY: "1" });
  });
  test("keys", () => {
    const url = "https://Shop.Example:443/p/42?utm_source=news&b=2&a=1&gclid=x&session=9#top";
    for (const args of [
      [url, "--namespace", "www"],
      [url, "--drop", "session", "--method", "head"],
      [url, "--no-default-drops"],
      ["http://a"],
      ["no-scheme"],
      ["http://u:p@H:80?b&a=1&&a"],
    ])
      same(["key", ...args]);
  });
  test("usage errors exit 2 with one line", () => {
    for (const args of [
      [],
      ["frobnicate"],
      ["encode", "--compressor", "lzma"],
      ["encode", "--ttl", "-1"],
      ["encode", "--ttl", "1_000"],
      ["encode", "--created-at", "18446744073709551616"],
      ["encode", "--level", "2147483648"],
      ["encode", "--threshold", "1", "--threshold", "2"],
      ["inspect", "--json", "--json"],
      ["inspect", "a", "b"],
      ["key"],
      ["key", "http://a/", "--method"],
      ["key", "http://a/", "--no-default-drops", "--no-default-drops"],
    ]) {
      const a = ts(args, "1");
      assert.equal(a.status, 2, args.join(" "));
      assert.match(a.stderr, /^larder: .* \(see --help\)\n$/);
      assert.equal(rust(args, "1").status, 2);
    }
  });
  test("--help exits 0 and lists the choices", () => {
    const r = ts(["--help"]);
    assert.equal(r.status, 0);
    for (const word of ["msgpack", "snappy", "response"]) assert.ok(r.stdout.includes(word));
  });
});
