#!/usr/bin/env node
// The `larder-ts` executable: runs one format command (src/cli.ts) with this process's stdin, environment and
// stdout, and exits with its status.

import { readFileSync } from "node:fs";
import { run } from "./cli.js";

function readAllStdin(): Uint8Array {
  try {
    return new Uint8Array(readFileSync(0));
  } catch (e) {
    if ((e as { code?: string }).code === "EAGAIN" || (e as { code?: string }).code === "EOF") return new Uint8Array(0);
    throw e;
  }
}

const [status, out, err] = run(process.argv.slice(2), {
  readStdin: readAllStdin,
  vars: process.env,
  stdoutIsTty: process.stdout.isTTY === true,
});
if (err) process.stderr.write(err);
process.stdout.write(out, () => {
  process.exitCode = status;
});
