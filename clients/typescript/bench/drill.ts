// The fetch drill (issue 33; bench/drills.py runs it, with the store behind larder-faults): `workers` async callers
// `fetch` random keys drill:0..keys from the store for `seconds`, the loader standing for the app (it counts a load,
// sleeps `loader-ms` and returns a query result of about 1 KiB), and one JSON line per interval on standard output
// says what they saw: calls, errors, loads and latency. The harness freezes, kills, slows or empties the store
// meanwhile. The contract is the same for every language (crates/cache/examples/drill.rs is Rust's).
//
//   node build/bench/drill.js --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000] [--loader-ms 20]
//     [--interval-ms 250]

import { setImmediate as turn } from "node:timers/promises";
import { Cache } from "../src/cache.js";
import type { Value } from "../src/value.js";
import { median, quantile } from "./stats.js";

const USAGE = `usage: drill --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000] [--loader-ms 20] \
[--interval-ms 250]
Opens a Cache (default options: the outage memory on) over the store URL and runs \`workers\` async callers for S
seconds, each fetching drill:<n> for n uniform in [0, keys) with a TTL of ttl-ms; the loader counts one load, sleeps
loader-ms and returns a ~1 KiB query result. Every interval-ms prints one JSON line
  {"t_ms", "calls", "errors", "loads", "p50_ms", "p99_ms", "max_ms"}
and at the end {"done": true, "calls", "errors", "loads"}; exits 0 within 2 s of S even if the store is frozen.
  --store URL        the store, as the client opens it (memcached://127.0.0.1:11211, redis://127.0.0.1:6379/0, ...)
  --seconds S        how long the callers run (> 0)
  --workers N        concurrent callers (default 16)
  --keys N           distinct keys (default 50)
  --ttl-ms MS        the fetches' TTL (default 60000)
  --loader-ms MS     how long a load takes (default 20)
  --interval-ms MS   how often a line is printed (default 250)`;

interface Options {
  store: string;
  seconds: number;
  workers: number;
  keys: number;
  ttlMs: number;
  loaderMs: number;
  intervalMs: number;
}

/** How long after `seconds` the calls still in flight are waited for before they are abandoned. */
const GRACE_MS = 600;
/** How long closing the cache may take before the process exits anyway (a frozen store may never answer). */
const CLOSE_MS = 150;
/** How many errors are described on standard error (the rest are only counted). */
const ERRORS_LOGGED = 5;

function usage(why: string): never {
  process.stderr.write(`drill: ${why}\n${USAGE}\n`);
  process.exit(2);
}

function parse(args: readonly string[]): Options {
  const o: Options = { store: "", seconds: 0, workers: 16, keys: 50, ttlMs: 60_000, loaderMs: 20, intervalMs: 250 };
  const number = (flag: string, value: string, least: number, whole: boolean): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n < least || (whole && !Number.isInteger(n)))
      usage(`${flag}: ${JSON.stringify(value)} is not ${whole ? "a whole number" : "a number"} >= ${least}`);
    return n;
  };
  for (let at = 0; at < args.length; at += 2) {
    const flag = args[at] as string;
    const value = args[at + 1];
    if (value === undefined) usage(`${flag} needs a value`);
    switch (flag) {
      case "--store":
        o.store = value;
        break;
      case "--seconds":
        o.seconds = number(flag, value, 0, false);
        if (o.seconds === 0) usage("--seconds must be more than 0");
        break;
      case "--workers":
        o.workers = number(flag, value, 1, true);
        break;
      case "--keys":
        o.keys = number(flag, value, 1, true);
        break;
      case "--ttl-ms":
        o.ttlMs = number(flag, value, 0, true);
        break;
      case "--loader-ms":
        o.loaderMs = number(flag, value, 0, true);
        break;
      case "--interval-ms":
        o.intervalMs = number(flag, value, 1, true);
        break;
      default:
        usage(`unknown option ${flag}`);
    }
  }
  if (o.store === "" || o.seconds === 0) usage("--store and --seconds are required");
  return o;
}

/** A query result of about 1 KiB: a map holding a list of small maps. */
function queryResult(id: number): Value {
  const rows: Value[] = [];
  for (let j = 0; j < 24; j++) rows.push({ i: j, name: `row ${j}`, score: j * 1.5 });
  return { id, rows };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What the callers saw since the last line. */
interface Interval {
  latenciesMs: number[];
  errors: number;
  loads: number;
}
const emptyInterval = (): Interval => ({ latenciesMs: [], errors: 0, loads: 0 });

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const o = parse(args);
  let cache: Cache;
  try {
    cache = new Cache(o.store);
  } catch (e) {
    usage(`cannot open ${o.store}: ${e instanceof Error ? e.message : String(e)}`);
  }

  // Times count from the process's start (performance.now()'s origin), not from here: the harness, which starts the
  // process and then changes the store, reads t_ms on its own clock, and `seconds` bounds the whole run.
  const ready = Math.round(performance.now());
  const began = new Date(performance.timeOrigin).toISOString();
  process.stderr.write(`drill: process started at ${began}, ready ${ready} ms later, against ${o.store}\n`);
  const end = o.seconds * 1000;
  const since = (): number => Math.round(performance.now());
  let now = emptyInterval();
  const total = { calls: 0, errors: 0, loads: 0 };
  let logged = 0;

  const print = (line: Record<string, unknown>): void => {
    process.stdout.write(`${JSON.stringify(line)}\n`);
  };
  /** Prints what was seen since the last line and starts a new interval. */
  const report = (): void => {
    const seen = now;
    now = emptyInterval();
    const latencies = seen.latenciesMs;
    total.calls += latencies.length;
    total.errors += seen.errors;
    total.loads += seen.loads;
    const ms = (x: number): number => Math.round(x * 1000) / 1000;
    print({
      t_ms: since(),
      calls: latencies.length,
      errors: seen.errors,
      loads: seen.loads,
      p50_ms: ms(median(latencies)),
      p99_ms: ms(quantile(latencies, 0.99)),
      max_ms: ms(latencies.reduce((a, b) => Math.max(a, b), 0)),
    });
  };

  const ttlMs = o.ttlMs;
  const loaderMs = o.loaderMs;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const n = Math.floor(Math.random() * o.keys);
      const called = performance.now();
      try {
        await cache.fetch(
          `drill:${n}`,
          async () => {
            now.loads++;
            await sleep(loaderMs);
            return queryResult(n);
          },
          { ttlMs },
        );
      } catch (e) {
        now.errors++;
        if (logged++ < ERRORS_LOGGED)
          process.stderr.write(`drill: fetch drill:${n} failed: ${e instanceof Error ? e.message : String(e)}\n`);
      }
      now.latenciesMs.push(performance.now() - called);
      // A call answered without I/O (a hit over memory://, or from the outage memory while the store is ejected)
      // resolves in microtasks only: without this turn of the event loop the callers would starve the timers of
      // the lines and of the end. An app's requests each come in on an event of their own too.
      await turn();
    }
  };
  const workers = Promise.all(Array.from({ length: o.workers }, worker));

  // One line every interval, on a schedule kept from the start (a late tick does not push the next ones back, and
  // ticks missed while the event loop was busy are skipped, not printed in a burst).
  for (let tick = 1; ; tick++) {
    tick = Math.max(tick, Math.floor(performance.now() / o.intervalMs) + 1);
    const next = tick * o.intervalMs;
    if (next >= end) break;
    while (performance.now() < next) await sleep(next - performance.now());
    report();
  }
  await sleep(end - performance.now());
  // The calls in flight at the end may finish within the grace; past it (a frozen store) they are abandoned.
  const grace = await Promise.race([workers.then(() => true), sleep(GRACE_MS).then(() => false)]);
  if (!grace) process.stderr.write("drill: calls still in flight at the end were abandoned\n");
  report();
  if (logged > ERRORS_LOGGED) process.stderr.write(`drill: ${logged - ERRORS_LOGGED} more errors not described\n`);
  process.stderr.write(`drill: cache stats ${JSON.stringify(cache.stats())}\n`);
  await Promise.race([cache.close().catch(() => {}), sleep(CLOSE_MS)]);
  process.stdout.write(`${JSON.stringify({ done: true, ...total })}\n`, () => process.exit(0));
}

await main();
