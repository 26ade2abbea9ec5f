// Other languages' processes incrementing one counter through a shared local store (file://, sqlite://) while this
// process does too: the store's exclusion (flock, SQLite's transactions) is real only if no increment is lost.
// Python runs from the repository's .venv, Ruby as `ruby -I clients/ruby/lib`.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "./paths.js";

const PYTHON = join(REPO, ".venv", "bin", "python");

const PY = `
import sys
from larder.stores import open_store
store = open_store(sys.argv[1])
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    store.incr(sys.argv[2], 1)
`;
const RB = `
require "larder"
require "larder/stores"
store = Larder::Stores.open(ARGV[0])
$stdout.puts "ready"
$stdout.flush
Integer(ARGV[2]).times { store.incr(ARGV[1], 1) }
`;

/** The process's first output line ("ready": its store is open), and its end. */
function run(command: string, args: string[]): { ready: Promise<void>; done: Promise<void> } {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (status) =>
      status === 0 ? resolve() : reject(new Error(`${command} exited ${status}: ${stderr.slice(-2000)}`)),
    );
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.once("data", () => resolve());
    done.then(resolve, reject);
  });
  return { ready, done };
}

/** Python and Ruby each add 1 to `key` `times` times, in their own processes, at the same time; `ready` once both
 * have opened the store (so what races is the increments, not the creation of tables). */
export function otherLanguagesIncrement(
  url: string,
  key: string,
  times: number,
): { ready: Promise<void>; done: Promise<void> } {
  assert.ok(existsSync(PYTHON), `${PYTHON} is missing: run \`make venv\` at the repository root`);
  const runs = [
    run(PYTHON, ["-c", PY, url, key, String(times)]),
    run("ruby", ["-I", join(REPO, "clients", "ruby", "lib"), "-e", RB, url, key, String(times)]),
  ];
  return {
    ready: Promise.all(runs.map((r) => r.ready)).then(() => {}),
    done: Promise.all(runs.map((r) => r.done)).then(() => {}),
  };
}
