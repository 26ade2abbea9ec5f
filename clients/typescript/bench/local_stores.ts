// The two local stores (sqlite://, file://) of this client against Python's on the same machine in the same run:
// median µs per call of get, set (1 KiB) and incr, one caller, over fresh temporary databases and directories.
// Python's stores are the reference (Node has no incumbent SQLite that installs here: README, "Files and SQLite").
// `node clients/typescript/build/bench/local_stores.js [--calls 2000]` from the repository root after `make venv`.

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "../src/stores/index.js";
import { REPO } from "../test/support/paths.js";

const calls = Number(process.argv[process.argv.indexOf("--calls") + 1]) || 2000;
const ROUNDS = 5;
const value = new Uint8Array(1024).fill(7);

const PY = `
import json, sys, time
from larder.stores import open_store
store = open_store(sys.argv[1])
calls = int(sys.argv[2])
value = b"\\x07" * 1024
store.set("warm", value)
ops = {"get": lambda i: store.get(f"k{i % 1000}"), "set": lambda i: store.set(f"k{i % 1000}", value),
       "incr": lambda i: store.incr("n", 1)}
out = {}
for name in ["set", "get", "incr"]:
    samples = []
    for _ in range(${ROUNDS}):
        t = time.perf_counter()
        for i in range(calls):
            ops[name](i)
        samples.append((time.perf_counter() - t) / calls * 1e6)
    out[name] = sorted(samples)[${ROUNDS} // 2]
print(json.dumps(out))
`;

async function typescript(url: string): Promise<Record<string, number>> {
  const store = openStore(url);
  await store.set("warm", value);
  const ops: Record<string, (i: number) => Promise<unknown>> = {
    set: (i) => store.set(`k${i % 1000}`, value),
    get: (i) => store.get(`k${i % 1000}`),
    incr: () => store.incr("n", 1),
  };
  const out: Record<string, number> = {};
  for (const [name, op] of Object.entries(ops)) {
    const samples: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const started = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) await op(i);
      samples.push(Number(process.hrtime.bigint() - started) / calls / 1000);
    }
    out[name] = samples.sort((a, b) => a - b)[ROUNDS >> 1] as number;
  }
  await store.close();
  return out;
}

function python(url: string): Record<string, number> {
  const r = spawnSync(join(REPO, ".venv", "bin", "python"), ["-c", PY, url, String(calls)], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`python: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const dir = mkdtempSync(join(tmpdir(), "larder-bench-local-"));
try {
  console.log(`${calls} calls per round, median of ${ROUNDS} rounds, µs per call (lower is better)`);
  console.log("| store | op | TypeScript | Python | Python / TypeScript |");
  console.log("|---|---|---|---|---|");
  for (const [name, url] of [
    ["sqlite", (who: string) => `sqlite://${dir}/${who}.db`],
    ["file", (who: string) => `file://${dir}/${who}`],
  ] as const) {
    const ts = await typescript(url("ts"));
    const py = python(url("py"));
    for (const op of Object.keys(ts)) {
      const [t, p] = [ts[op] as number, py[op] as number];
      console.log(`| ${name} | ${op} | ${t.toFixed(1)} | ${p.toFixed(1)} | ${(p / t).toFixed(2)} |`);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
