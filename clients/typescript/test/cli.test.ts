// The TypeScript CLI (larder-ts encode|inspect|key) against the Rust binary on the same inputs: exit status and
// stdout byte for byte, one `larder: ` line on stderr for every error (spec/CLI.md). Every vector entry is
// inspected by both, in both output forms and as a terminal would see it.

import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { run } from "../src/cli.js";
import { LARDER_BIN, REPO, TS_ROOT } from "./support/paths.js";

const BIN = join(TS_ROOT, "build", "src", "bin.js");

interface Ran {
  status: number;
  stdout: Buffer;
  stderr: string;
}

/** The TypeScript CLI, in this process (the same `run` the larder-ts executable calls). */
function ts(args: string[], stdin: Uint8Array | string = "", vars: Record<string, string> = {}): Ran {
  const input = typeof stdin === "string" ? new Uint8Array(Buffer.from(stdin)) : stdin;
  const [status, out, err] = run(args, { readStdin: () => input, vars, stdoutIsTty: false });
  return { status, stdout: Buffer.from(out), stderr: err };
}

/** The Rust binary, as a process (several at once: its start-up is what costs). */
function rust(args: string[], stdin: Uint8Array | string = "", vars: Record<string, string> = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      LARDER_BIN,
      args,
      {
        encoding: "buffer",
        env: { ...process.env, LARDER_FORCE_TTY: "0", ...vars },
        timeout: 20_000,
        maxBuffer: 64 << 20,
      },
      (error, stdout, stderr) => {
        const status = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        if (status === -1) reject(error);
        else resolve({ status, stdout, stderr: stderr.toString("utf8") });
      },
    );
    child.stdin?.on("error", () => {}); // a command that exits before reading its stdin
    child.stdin?.end(stdin);
  });
}

type Call = [string[], Uint8Array | string, Record<string, string>?];

/** Runs every call through both, at most four Rust processes at a time, and compares them. */
async function same(calls: Call[]): Promise<Ran[]> {
  const results: Ran[] = new Array(calls.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < calls.length) {
      const i = next++;
      const [args, stdin, vars = {}] = calls[i] as Call;
      const b = await rust(args, stdin, vars);
      const a = ts(args, stdin, { LARDER_FORCE_TTY: "0", ...vars });
      assert.equal(a.status, b.status, `exit status of ${args.join(" ")}: ${a.stderr} / ${b.stderr}`);
      assert.deepEqual(a.stdout, b.stdout, `stdout of ${args.join(" ")}`);
      if (a.status !== 0) {
        assert.match(a.stderr, /^larder: [^\n]*\n$/, "one larder: line");
        assert.match(b.stderr, /^larder: /);
      }
      results[i] = a;
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return results;
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
  const created = (args: string[]): string[] =>
    args.includes("--created-at") ? [] : ["--created-at", "1700000000000"];
  test("encode gives the same bytes (uncompressed) and statuses", async () => {
    await same(
      encodes.map(([args, stdin]): Call => [["encode", "--compressor", "none", ...created(args), ...args], stdin]),
    );
  });
  test("inspect of what each encodes is the same, in every form", async () => {
    const calls: Call[] = [];
    for (const [args, stdin] of encodes) {
      const entry = ts(["encode", ...created(args), ...args], stdin);
      if (entry.status !== 0) continue;
      for (const form of [[], ["--json"], ["--body"]]) calls.push([["inspect", ...form], entry.stdout]);
      calls.push([["inspect", "--body"], entry.stdout, { LARDER_FORCE_TTY: "1" }]);
    }
    await same(calls);
  });
  test("inspect of every valid vector entry", async () => {
    const calls: Call[] = [];
    for (const c of vectors("entries.json")) {
      const data = Buffer.from(c.entry_hex as string, "hex");
      for (const form of [[], ["--json"], ["--body"]]) calls.push([["inspect", ...form], data]);
      calls.push([["inspect", "--body"], data, { LARDER_FORCE_TTY: "1" }]);
      calls.push([["inspect", "--full"], data, { LARDER_FORCE_TTY: "1" }]);
    }
    await same(calls);
  });
  test("inspect of every invalid vector entry names the same error kind", async () => {
    const cases = vectors("invalid.json");
    const results = await same(
      cases.map(
        (c): Call => [
          c.max_size === undefined ? ["inspect"] : ["inspect", "--max-size", String(c.max_size)],
          Buffer.from(c.entry_hex as string, "hex"),
        ],
      ),
    );
    cases.forEach((c, i) => {
      const r = results[i] as Ran;
      assert.equal(r.status, 1);
      assert.ok(r.stderr.startsWith(`larder: invalid entry: ${c.error}: `), `${c.name}: ${r.stderr}`);
    });
  });
  test("long texts are cut on a terminal as the Rust binary cuts them", async () => {
    const entry = ts(["encode", "--serializer", "text", "--created-at", "0"], "x".repeat(300)).stdout;
    await same([
      [["inspect"], entry, { LARDER_FORCE_TTY: "1" }],
      [["inspect", "--full"], entry, { LARDER_FORCE_TTY: "1" }],
    ]);
  });
  test("keys", async () => {
    const url = "https://Shop.Example:443/p/42?utm_source=news&b=2&a=1&gclid=x&session=9#top";
    const keys = [
      [url, "--namespace", "www"],
      [url, "--drop", "session", "--method", "head"],
      [url, "--no-default-drops"],
      ["http://a"],
      ["no-scheme"],
      ["http://u:p@H:80?b&a=1&&a"],
    ];
    await same(keys.map((args): Call => [["key", ...args], ""]));
  });
  test("usage errors exit 2 with one line", async () => {
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
      assert.equal((await rust(args, "1")).status, 2);
    }
  });
  test("--help exits 0 and lists the choices", () => {
    const r = ts(["--help"]);
    assert.equal(r.status, 0);
    for (const word of ["msgpack", "snappy", "response"]) assert.ok(r.stdout.includes(word));
  });
  test("the larder-ts executable reads stdin, writes stdout and exits with the status", () => {
    const encoded = spawnSync(process.execPath, [BIN, "encode", "--created-at", "0"], { input: '{"a":1}' });
    assert.equal(encoded.status, 0);
    const inspected = spawnSync(process.execPath, [BIN, "inspect", "--json"], { input: encoded.stdout });
    assert.match(inspected.stdout.toString(), /"value":\{"a":1\}/);
    const bad = spawnSync(process.execPath, [BIN, "inspect"], { input: "nope" });
    assert.equal(bad.status, 1);
    assert.match(bad.stderr.toString(), /^larder: invalid entry: bad_magic: /);
  });
});
