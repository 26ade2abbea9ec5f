// Every case of every file in spec/vectors, one test each, through the same cases the conformance runner judges
// (test/conformance.ts), so the matrix and the suite cannot disagree; and the runner's own contract.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { casesOf, FILES, judge } from "./conformance.js";
import { REPO, TS_ROOT } from "./support/paths.js";

const VECTORS = join(REPO, "spec", "vectors");

describe("spec/vectors", () => {
  for (const file of Object.keys(FILES)) {
    describe(file, () => {
      for (const c of casesOf(join(VECTORS, file))) test(c.name, () => c.check());
    });
  }
  test("every vector file is known to the runner", () => {
    const files = readdirSync(VECTORS).filter((f) => f.endsWith(".json"));
    assert.deepEqual(
      files.filter((f) => !(f in FILES)),
      [],
    );
  });
});

describe("conformance runner", () => {
  const runner = join(TS_ROOT, "build", "test", "conformance.js");
  test("prints one JSON line per file and exits 0", () => {
    const out = execFileSync(process.execPath, [runner, "spec/vectors/ring.json", "spec/vectors/keys.json"], {
      cwd: REPO,
      encoding: "utf8",
    });
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 2);
    assert.deepEqual(
      lines.map((l) => [l.language, l.file, l.status]),
      [
        ["typescript", "ring.json", "pass"],
        ["typescript", "keys.json", "pass"],
      ],
    );
  });
  test("a wrong case fails with its name and reason", () => {
    const dir = mkdtempSync(join(tmpdir(), "larder-ts-"));
    const path = join(dir, "keys.json");
    writeFileSync(
      path,
      JSON.stringify({
        schema: 1,
        http: [{ name: "wrong", method: "GET", url: "http://a/", key: "nope" }],
        safe: [],
        namespaced: [],
        variants: [],
        alternates: [],
      }),
    );
    const r = judge(path);
    assert.equal(r.status, "fail");
    assert.deepEqual(r.failed, ["http/wrong"]);
    assert.match(r.reason ?? "", /GET:http:\/\/a\//);
  });
  test("an unknown or unreadable file is a failure, not a pass", () => {
    const dir = mkdtempSync(join(tmpdir(), "larder-ts-"));
    writeFileSync(join(dir, "new.json"), "{}");
    assert.equal(judge(join(dir, "new.json")).status, "fail");
    writeFileSync(join(dir, "ring.json"), "{not json");
    assert.equal(judge(join(dir, "ring.json")).status, "fail");
    assert.equal(judge(join(dir, "entries.json")).status, "fail");
  });
  test("without files it exits 2", () => {
    assert.throws(
      () => execFileSync(process.execPath, [runner], { stdio: "pipe" }),
      (e: { status: number }) => e.status === 2,
    );
  });
});
