// `npm pack` makes an installable tarball: installed alone in an empty project (from the npm cache the suite's own
// npm ci filled), it imports, encodes and decodes, runs its larder-ts binary, and finds its own copy of the Redis
// scripts (spec/redis's bytes, copied at build time) rather than the checkout's.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { REPO, TS_ROOT } from "./support/paths.js";

test("npm pack gives a tarball that installs and works on its own", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-pack-"));
  const npm = (args: string[], cwd: string): string =>
    execFileSync("npm", args, {
      cwd,
      encoding: "utf8",
      env: { ...process.env, npm_config_loglevel: "error", npm_config_update_notifier: "false" },
    });
  const tarball = npm(["pack", "--silent", "--ignore-scripts", "--pack-destination", dir], TS_ROOT)
    .trim()
    .split("\n")
    .at(-1) as string;
  const listing = execFileSync("tar", ["tzf", join(dir, tarball)], { encoding: "utf8" });
  for (const file of [
    "package/dist/index.js",
    "package/dist/index.d.ts",
    "package/dist/bin.js",
    "package/redis/incr.lua",
    "package/README.md",
  ])
    assert.ok(listing.includes(file), file);
  assert.ok(!listing.includes("package/test/") && !listing.includes("package/src/"), "only the build goes in");
  const app = join(dir, "app");
  execFileSync("mkdir", [app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", type: "module" }));
  npm(["install", "--prefer-offline", "--no-audit", "--no-fund", join(dir, tarball)], app);
  writeFileSync(
    join(app, "check.mjs"),
    `import { encode, decode, scriptsLocation } from "larder-cache";
     const e = encode({ a: 1 }, { compressor: "zstd", threshold: 0 });
     console.log(JSON.stringify({ value: decode(e).value, scripts: scriptsLocation() }));`,
  );
  const out = JSON.parse(execFileSync(process.execPath, ["check.mjs"], { cwd: app, encoding: "utf8" }));
  assert.deepEqual(out.value, { a: 1 });
  assert.equal(out.scripts, join(app, "node_modules", "larder-cache", "redis"));
  assert.deepEqual(readFileSync(join(out.scripts, "tag.lua")), readFileSync(join(REPO, "spec", "redis", "tag.lua")));
  const key = execFileSync(join(app, "node_modules", ".bin", "larder-ts"), ["key", "http://A.example/x?b=1&a=2"], {
    encoding: "utf8",
  });
  assert.equal(key, "GET:http://a.example/x?a=2&b=1\n");
});
