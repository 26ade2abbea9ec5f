// larder's Rust front for the end-to-end page tests (pages.test.ts, next.e2e.test.ts): `larder serve` in front of
// an app on a shared store, an HTTP GET that reads the whole answer, and a bounded wait for a condition.

import { type ChildProcess, spawn } from "node:child_process";
import http from "node:http";
import { LARDER_BIN } from "./paths.js";
import { freePort } from "./servers.js";

export interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export function get(port: number, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, headers, method, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error("timeout")));
    req.end();
  });
}

export async function waitFor(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} within ${ms} ms`);
}

/** `larder serve` (the Rust binary) in front of `upstream`, on `storeUrl` under `namespace`, answering /health. */
export async function startFront(
  upstream: string,
  storeUrl: string,
  namespace: string,
): Promise<{ process: ChildProcess; port: number }> {
  const port = await freePort();
  const adminPort = await freePort();
  const front = spawn(
    LARDER_BIN,
    [
      "serve",
      "--upstream",
      upstream,
      "--listen",
      `127.0.0.1:${port}`,
      "--admin",
      `127.0.0.1:${adminPort}`,
      "--admin-no-token",
      "--store",
      storeUrl,
      "--namespace",
      namespace,
    ],
    {
      stdio: "ignore",
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LARDER_"))),
    },
  );
  await waitFor(async () => (await get(adminPort, "/health")).status === 200, "larder serve did not answer /health");
  return { process: front, port };
}
