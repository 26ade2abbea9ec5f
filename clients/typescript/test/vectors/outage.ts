// outage.json (spec/vectors/README.md, "outage.json"; spec/STORES.md §3, "When the store fails"): `fetch` on a cache
// whose store sits behind larder-faults ($LARDER_FAULTS), a fault proxy in front of a real memcached or Redis
// (LARDER_CONFORMANCE_MEMCACHED, LARDER_CONFORMANCE_REDIS). Each case starts the proxy in front of its server, opens
// the *faulted* cache over the proxy (the case's url_query, default options otherwise: outage memory on) and a
// *direct* cache over the server, both under one fresh random namespace, and runs the steps in order; a failure
// names the step and what differed.

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface, type Interface } from "node:readline";
import { Cache } from "../../src/cache.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, get, list, num, show, str } from "./common.js";

const TTL_MS = 60_000;
const SERVERS: Record<string, string> = {
  memcached: "LARDER_CONFORMANCE_MEMCACHED",
  redis: "LARDER_CONFORMANCE_REDIS",
};
/** How long larder-faults may take to print its address or answer a command. */
const ANSWER_MS = 10_000;
/** Beyond a round's bound, how long the runner waits for its callers before it reports them stuck. */
const STUCK_MS = 10_000;
/** How long closing a cache (whose server may be frozen) may take before the case goes on without it. */
const CLOSE_MS = 2_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function env(name: string, what: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set: ${what}`);
  return value;
}

/** A larder-faults process in front of `upstream`: its address, and commands written to its standard input. */
class FaultProxy {
  /** 127.0.0.1:PORT, where it listens. */
  address = "";
  private readonly waiting: Array<(line: string | undefined) => void> = [];
  private readonly queued: string[] = [];
  private ended = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly lines: Interface,
  ) {}

  static async start(binary: string, upstream: string): Promise<FaultProxy> {
    const child = spawn(binary, [upstream], { stdio: ["pipe", "pipe", "ignore"] });
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const proxy = new FaultProxy(child, lines);
    lines.on("line", (line) => proxy.arrived(line.trim()));
    lines.on("close", () => proxy.close());
    child.once("error", () => proxy.close());
    try {
      proxy.address = await proxy.line("its address");
    } catch (e) {
      await proxy.stop();
      throw e;
    }
    if (!/^[0-9.]+:[0-9]+$/.test(proxy.address)) {
      await proxy.stop();
      throw new Error(`larder-faults ${upstream} printed ${JSON.stringify(proxy.address)}, not 127.0.0.1:PORT`);
    }
    return proxy;
  }

  private arrived(line: string): void {
    const next = this.waiting.shift();
    if (next === undefined) this.queued.push(line);
    else next(line);
  }

  private close(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w(undefined);
  }

  private async line(what: string): Promise<string> {
    const queued = this.queued.shift();
    if (queued !== undefined) return queued;
    if (this.ended) throw new Error(`larder-faults exited before giving ${what}`);
    let timer: NodeJS.Timeout | undefined;
    const line = await new Promise<string | undefined>((resolve) => {
      this.waiting.push(resolve);
      timer = setTimeout(() => resolve(undefined), ANSWER_MS);
    });
    clearTimeout(timer);
    if (line === undefined) throw new Error(`larder-faults gave no ${what} within ${ANSWER_MS} ms`);
    return line;
  }

  /** Writes the command and waits for its `ok`. */
  async command(text: string): Promise<void> {
    this.child.stdin?.write(`${text}\n`);
    const answer = await this.line(`answer to ${JSON.stringify(text)}`);
    if (!answer.startsWith("ok")) throw new Error(`larder-faults answered ${JSON.stringify(answer)} to ${text}`);
  }

  /** Closes its standard input (it then exits), killing it if it has not within 2 s. */
  async stop(): Promise<void> {
    const child = this.child;
    this.lines.close();
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.stdin?.end();
    await Promise.race([exited, sleep(2000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}

/** The loader of a step: sleeps, counts its calls, returns its value. */
class Loads {
  count = 0;
  constructor(
    private readonly value: string,
    private readonly ms: number,
  ) {}

  readonly load = async (): Promise<string> => {
    this.count++;
    if (this.ms > 0) await sleep(this.ms);
    return this.value;
  };
}

function url(store: string, address: string, query: string): string {
  const base = store === "memcached" ? `memcached://${address}` : `redis://${address}/0`;
  return query === "" ? base : `${base}?${query}`;
}

async function closeBounded(cache: Cache): Promise<void> {
  await Promise.race([cache.close().catch(() => undefined), sleep(CLOSE_MS)]);
}

/** One step of a case, on its two caches and its proxy. */
async function runStep(step: Value, label: string, faulted: Cache, direct: Cache, proxy: FaultProxy): Promise<void> {
  if (!(step instanceof Map)) throw new TypeError(`${label} is not an object`);
  const [kind] = [...step.keys()];
  if (kind === "fault") await proxy.command(str(get(step, "fault"), "fault"));
  else if (kind === "burst") await burst(get(step, "burst"), get(step, "expect"), label, faulted);
  else if (kind === "write_direct") {
    const w = get(step, "write_direct");
    await direct.set(str(get(w, "key"), "key"), str(get(w, "value"), "value"), { ttlMs: TTL_MS });
  } else if (kind === "read_direct") {
    const r = get(step, "read_direct");
    const key = str(get(r, "key"), "key");
    const got = await direct.get(key);
    assert(got === str(get(r, "value"), "value"), `${label}: the direct cache read ${key} as ${show(got)}`);
  } else if (kind === "flush_direct") {
    // The server emptied (memcached's flush_all, Redis's FLUSHDB): a server that comes back empty.
    await direct.store.clear();
  } else if (kind === "await_value") await awaitValue(get(step, "await_value"), label, faulted);
  else throw new TypeError(`${label}: unknown step ${String(kind)}`);
}

/** `rounds` rounds of `callers` concurrent fetches, each checked; then the loader's count over the step. */
async function burst(b: Value, expect: Value, label: string, faulted: Cache): Promise<void> {
  const key = str(get(b, "key"), "key");
  const callers = num(get(b, "callers"), "callers");
  const rounds = num(get(b, "rounds"), "rounds");
  const loads = new Loads(str(get(b, "loader_value"), "loader_value"), num(get(b, "loader_ms"), "loader_ms"));
  const value = str(get(expect, "value"), "value");
  const within = num(get(expect, "round_within_ms"), "round_within_ms");
  for (let round = 1; round <= rounds; round++) {
    const at = `${label}, round ${round}`;
    const started = performance.now();
    const calls = Array.from({ length: callers }, () => faulted.fetch(key, loads.load, { ttlMs: TTL_MS }));
    let timer: NodeJS.Timeout | undefined;
    const settled = await Promise.race([
      Promise.allSettled(calls),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), within + STUCK_MS);
      }),
    ]);
    clearTimeout(timer);
    const took = Math.round(performance.now() - started);
    assert(settled !== undefined, `${at}: the fetches had not all returned after ${took} ms`);
    settled.forEach((outcome, i) => {
      if (outcome.status === "rejected") {
        const e = outcome.reason as Error;
        assert(false, `${at}: fetch ${i + 1} raised ${e?.name}: ${e?.message}`);
      } else
        assert(outcome.value === value, `${at}: fetch ${i + 1} returned ${show(outcome.value)}, not ${show(value)}`);
    });
    assert(took <= within, `${at}: the round took ${took} ms, not within ${within} ms`);
  }
  const exactly = get(expect, "loads");
  if (exactly !== undefined) {
    const n = num(exactly, "loads");
    assert(loads.count === n, `${label}: the loader ran ${loads.count} times, not ${n}`);
  } else {
    const most = num(get(expect, "loads_at_most"), "loads_at_most");
    assert(loads.count <= most, `${label}: the loader ran ${loads.count} times, more than ${most}`);
  }
}

/** One fetch every 100 ms until it returns `value`; fails after `within_ms`. */
async function awaitValue(a: Value, label: string, faulted: Cache): Promise<void> {
  const key = str(get(a, "key"), "key");
  const value = str(get(a, "value"), "value");
  const within = num(get(a, "within_ms"), "within_ms");
  const loads = new Loads(str(get(a, "loader_value"), "loader_value"), 0);
  const deadline = performance.now() + within;
  for (;;) {
    let last: unknown;
    try {
      last = await faulted.fetch(key, loads.load, { ttlMs: TTL_MS });
    } catch (e) {
      last = `${(e as Error).name}: ${(e as Error).message}`;
    }
    if (last === value) return;
    assert(performance.now() < deadline, `${label}: fetch still returned ${show(last)} after ${within} ms`);
    await sleep(100);
  }
}

async function check(c: Value): Promise<void> {
  const store = str(get(c, "store"), "store");
  const variable = SERVERS[store];
  if (variable === undefined) throw new TypeError(`unknown store ${store}`);
  const server = env(variable, `the ${store} server (127.0.0.1:PORT) the outage cases put larder-faults before`);
  const faults = env("LARDER_FAULTS", "the larder-faults binary (cargo build -p larder-testkit --bins)");
  const query = str(get(c, "url_query"), "url_query");
  const steps = list(get(c, "steps"), "steps");
  const namespace = `outage-${randomBytes(8).toString("hex")}`;
  const proxy = await FaultProxy.start(faults, server);
  const faulted = new Cache(url(store, proxy.address, query), { namespace });
  const direct = new Cache(url(store, server, ""), { namespace });
  try {
    for (const [i, step] of steps.entries()) {
      const kind = step instanceof Map ? String([...step.keys()][0]) : "?";
      await runStep(step, `step ${i + 1} (${kind})`, faulted, direct, proxy);
    }
  } finally {
    await Promise.all([closeBounded(faulted), closeBounded(direct)]);
    await proxy.stop();
  }
}

/** One case per entry of the file (spec/vectors/README.md: `cases` counts the file's cases). */
export function outageCases(document: Value): Case[] {
  return list(get(document, "cases"), "cases").map((c) => {
    const store = str(get(c, "store"), "store");
    if (SERVERS[store] === undefined) throw new TypeError(`${str(get(c, "name"), "name")}: unknown store ${store}`);
    return { name: str(get(c, "name"), "name"), check: () => check(c) };
  });
}
