// The raw rows of clients.ts for bench/report.py (`--raw FILE`, read its docstring): one JSON line per contender
// and round of every figure (ops/s, and client CPU µs per op, which does not depend on how busy the shared machine
// is), then a meta line naming the comparisons (larder against each incumbent of a figure) and the targets (>= 1.0x
// each incumbent's ops/s). A first meta line goes out before any row (report.py needs one first); the last one,
// written when the run ends, carries the pairs and targets of the figures that ran.

import { appendFileSync } from "node:fs";

export interface Pair {
  subject: string;
  vs: string;
}

export class RawLog {
  private readonly pairs: Pair[] = [];
  private readonly targets: Array<{ case: string; subject: string; vs: string; metric: string; ratio: number }> = [];

  constructor(
    private readonly path: string | undefined,
    private readonly command: string,
  ) {
    this.meta();
  }

  /** One contender's round of figure `what`. */
  row(what: string, subject: string, round: number, ops: number, cpuUs: number): void {
    this.write({ bench: "typescript", case: what, subject, round, ops, cpu_us: cpuUs });
  }

  /** Figure `what` holds `subject` to `ratio` times `vs`'s ops/s. */
  target(what: string, subject: string, vs: string, ratio = 1.0): void {
    if (!this.pairs.some((p) => p.subject === subject && p.vs === vs)) this.pairs.push({ subject, vs });
    this.targets.push({ case: what, subject, vs, metric: "ops", ratio });
  }

  /** The closing meta line, with every pair and target. */
  close(): void {
    this.meta();
  }

  private meta(): void {
    this.write({
      meta: true,
      bench: "typescript",
      title:
        "TypeScript client: larder's stores, Cache and KeyvLarder against memjs, ioredis, node-redis, @keyv/memcache, @keyv/redis and lru-cache (strings and structured values)",
      command: this.command,
      date: `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`,
      setup:
        "one process, contenders interleaved within each round; structured values JSON-encoded for the incumbents as their users do; CPU µs/op is the client process's",
      subject: "larder",
      metrics: [
        { name: "ops", label: "ops/s", better: "higher" },
        { name: "cpu_us", label: "client CPU µs/op", better: "lower" },
      ],
      pairs: this.pairs,
      targets: this.targets,
    });
  }

  private write(row: object): void {
    if (this.path !== undefined) appendFileSync(this.path, `${JSON.stringify(row)}\n`);
  }
}
