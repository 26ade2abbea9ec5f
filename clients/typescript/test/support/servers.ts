// Real servers for the store tests, started on free loopback ports and stopped afterwards (as crates/testkit and
// clients/python/tests/servers.py do); and larder-hostile, the hostile memcached/Redis server of crates/testkit.
// A missing binary is a test failure that says to run `make services`, never a skip.

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import net from "node:net";
import { createInterface } from "node:readline";
import { LARDER_HOSTILE } from "./paths.js";

export function findBinary(name: string, dirs: string[] = []): string {
  for (const dir of [...(process.env.PATH ?? "").split(":"), ...dirs]) {
    const path = `${dir}/${name}`;
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {}
  }
  throw new Error(`${name} is not installed: run \`make services\` at the repository root`);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with status ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: "127.0.0.1", port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} did not listen on port ${port} within ${timeoutMs} ms`);
}

/** A server process on a loopback port. */
export class ServerProcess {
  private child: ChildProcess | undefined;
  constructor(
    readonly what: string,
    readonly command: string[],
    readonly port: number,
    readonly cwd?: string,
  ) {}

  async start(): Promise<this> {
    const [exe, ...args] = this.command as [string, ...string[]];
    this.child = spawn(exe, args, { stdio: "ignore", detached: false, cwd: this.cwd });
    await waitForPort(this.port, this.child, this.what);
    return this;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null) child.kill("SIGKILL");
  }

  /** Stops the server abruptly (failure drills). */
  kill(): void {
    this.child?.kill("SIGKILL");
    this.child = undefined;
  }
}

export async function startMemcached(port?: number): Promise<ServerProcess> {
  const p = port ?? (await freePort());
  const command = [findBinary("memcached"), "-l", "127.0.0.1", "-p", String(p), "-U", "0", "-m", "64", "-t", "2"];
  if (process.getuid?.() === 0) command.push("-u", "root");
  return new ServerProcess("memcached", command, p).start();
}

/** One hostile server (larder-hostile PROTOCOL BEHAVIOUR); it exits when its stdin closes. */
export class Hostile {
  private constructor(
    private readonly child: ChildProcess,
    readonly address: string,
  ) {}

  static async start(protocol: "memcached" | "redis", behaviour: string, ...args: string[]): Promise<Hostile> {
    try {
      accessSync(LARDER_HOSTILE, constants.X_OK);
    } catch {
      throw new Error(`larder-hostile is missing at ${LARDER_HOSTILE}: cargo build -p larder-testkit --bins`);
    }
    const child = spawn(LARDER_HOSTILE, [protocol, behaviour, ...args], { stdio: ["pipe", "pipe", "ignore"] });
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const address = await new Promise<string>((resolve, reject) => {
      lines.once("line", (line) => resolve(line.trim()));
      child.once("exit", () => reject(new Error(`larder-hostile ${protocol} ${behaviour} did not start`)));
    });
    lines.close();
    return new Hostile(child, address);
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.stdin?.end();
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

export async function startRedis(port?: number): Promise<ServerProcess> {
  const p = port ?? (await freePort());
  const command = [
    findBinary("redis-server"),
    "--port",
    String(p),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--protected-mode",
    "no",
  ];
  return new ServerProcess("redis-server", command, p).start();
}

/** A free loopback port below 55000 whose port + 10000 (a Cluster node's bus) is free too. */
async function freeBusPort(): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = await freePort();
    if (port >= 55000) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", () => resolve(false));
      server.listen(port + 10000, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (busFree) return port;
  }
  throw new Error("no free port pair for a Redis Cluster node");
}

/** A three-master Redis Cluster (no replicas) on free loopback ports, made with `redis-cli --cluster create`. */
export class RedisCluster {
  private constructor(
    readonly nodes: ServerProcess[],
    private readonly dir: string,
  ) {}

  static async start(): Promise<RedisCluster> {
    const { mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(`${tmpdir()}/larder-ts-cluster-`);
    const nodes: ServerProcess[] = [];
    const cluster = new RedisCluster(nodes, dir);
    try {
      for (let i = 0; i < 3; i++) {
        const port = await freeBusPort();
        const command = [findBinary("redis-server"), "--port", String(port), "--bind", "127.0.0.1", "--save", ""];
        command.push("--appendonly", "no", "--protected-mode", "no", "--cluster-enabled", "yes");
        command.push("--cluster-config-file", `nodes-${port}.conf`, "--cluster-node-timeout", "2000");
        nodes.push(await new ServerProcess("redis-server (cluster)", command, port, dir).start());
      }
      cluster.cli(nodes[0] as ServerProcess, "--cluster", "create", ...nodes.map((n) => n.address));
      const deadline = Date.now() + 20_000;
      for (const node of nodes) {
        while (!cluster.cli(node, "cluster", "info").includes("cluster_state:ok")) {
          if (Date.now() > deadline) throw new Error("the Redis Cluster was not ok within 20 s");
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      return cluster;
    } catch (e) {
      await cluster.stop();
      throw e;
    }
  }

  cli(node: ServerProcess, ...args: string[]): string {
    const extra = args[0] === "--cluster" ? ["--cluster-replicas", "0", "--cluster-yes"] : [];
    return execFileSync(findBinary("redis-cli"), ["-h", "127.0.0.1", "-p", String(node.port), ...args, ...extra], {
      encoding: "utf8",
      timeout: 30_000,
    });
  }

  get url(): string {
    return `redis+cluster://${this.nodes.map((n) => n.address).join(",")}`;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
    const { rmSync } = await import("node:fs");
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const PG_BIN_DIRS = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"];

/** PostgreSQL in a temporary data directory, trust authentication, user `larder` (run as the `postgres` user when
 * this process is root: PostgreSQL refuses to run as root). */
export async function startPostgres(): Promise<ServerProcess & { url: string }> {
  const { mkdtempSync, mkdirSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(`${tmpdir()}/larder-ts-pg-`);
  const data = `${dir}/data`;
  mkdirSync(data);
  const root = process.getuid?.() === 0;
  const as = (binary: string): string[] => (root ? [findBinary("runuser"), "-u", "postgres", "--", binary] : [binary]);
  if (root) execFileSync("chown", ["-R", "postgres:postgres", dir]);
  const [initdb, ...initArgs] = as(findBinary("initdb", PG_BIN_DIRS));
  execFileSync(
    initdb as string,
    [...initArgs, "-D", data, "-A", "trust", "-U", "larder", "--no-sync", "-E", "UTF8", "--locale=C"],
    { stdio: "ignore" },
  );
  const port = await freePort();
  const command = [...as(findBinary("postgres", PG_BIN_DIRS)), "-D", data, "-p", String(port), "-k", data];
  command.push(
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "fsync=off",
    "-c",
    "synchronous_commit=off",
    "-c",
    "full_page_writes=off",
  );
  const server = await new ServerProcess("postgres", command, port).start();
  // PostgreSQL listens before it accepts sessions ("the database system is starting up"): wait for pg_isready too.
  const isReady = findBinary("pg_isready", PG_BIN_DIRS);
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      execFileSync(isReady, ["-q", "-h", "127.0.0.1", "-p", String(port), "-U", "larder", "-d", "postgres"]);
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        await server.stop();
        throw new Error(`postgres on port ${port} did not accept sessions within 20 s: ${String(error)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return Object.assign(server, { url: `postgres://larder@127.0.0.1:${port}/postgres` });
}
