// A scripted memcached or Redis server for the tests that need to see the exact bytes a store sends (keys on the
// wire, STORES.md §2) or to answer one command with one hostile reply shape (whole-reply bounds) that larder-hostile
// does not make. It parses each command the client sends (a memcached line and an `ms` data block, or a RESP array
// of bulk strings), records it, and writes whatever the test's handler answers; it counts connections opened and
// closed, so a test can tell a connection the store dropped from one it kept.

import net from "node:net";

/** One command as received: its parts (a memcached line split at spaces, or RESP's bulk strings), the raw line
 * without CRLF (memcached), and an `ms` command's data block. */
export interface Command {
  parts: Buffer[];
  line: Buffer;
  data: Buffer | undefined;
}

/** What to send back for a command: bytes or text, or nothing (then the server stays silent). */
export type Answer = (command: Command, connection: number) => Buffer | string | undefined;

export class FakeServer {
  readonly commands: Command[] = [];
  opened = 0;
  closed = 0;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  static async start(protocol: "memcached" | "redis", answer: Answer): Promise<FakeServer> {
    let fake: FakeServer | undefined;
    const server = net.createServer((socket) => {
      const self = fake as FakeServer;
      const id = ++self.opened;
      self.sockets.add(socket);
      socket.on("close", () => {
        self.closed++;
        self.sockets.delete(socket);
      });
      socket.on("error", () => {});
      let pending = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          const parsed = protocol === "memcached" ? memcachedCommand(pending) : redisCommand(pending);
          if (parsed === undefined) break;
          const [command, used] = parsed;
          pending = pending.subarray(used);
          self.commands.push(command);
          const reply = answer(command, id);
          if (reply !== undefined && !socket.destroyed) socket.write(reply);
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    fake = new FakeServer(server, (server.address() as net.AddressInfo).port);
    return fake;
  }

  /** The commands received since `from`, and `from` for the next call. */
  since(from: number): Command[] {
    return this.commands.slice(from);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** One memcached command at the start of `buf` (a line, and the data block an `ms` announces), or undefined. */
function memcachedCommand(buf: Buffer): [Command, number] | undefined {
  const eol = buf.indexOf("\r\n");
  if (eol === -1) return undefined;
  const line = buf.subarray(0, eol);
  const parts = split(line, 0x20);
  let used = eol + 2;
  let data: Buffer | undefined;
  if (parts[0]?.toString() === "ms") {
    const length = Number(parts[2]?.toString());
    if (buf.length < used + length + 2) return undefined;
    data = buf.subarray(used, used + length);
    used += length + 2;
  }
  return [{ parts, line: Buffer.from(line), data: data && Buffer.from(data) }, used];
}

/** One RESP command (an array of bulk strings) at the start of `buf`, or undefined. */
function redisCommand(buf: Buffer): [Command, number] | undefined {
  let at = 0;
  const line = (): string | undefined => {
    const eol = buf.indexOf("\r\n", at);
    if (eol === -1) return undefined;
    const text = buf.toString("latin1", at, eol);
    at = eol + 2;
    return text;
  };
  const head = line();
  if (head === undefined) return undefined;
  if (!head.startsWith("*")) throw new Error(`not a RESP command: ${head}`);
  const parts: Buffer[] = [];
  for (let i = 0; i < Number(head.slice(1)); i++) {
    const size = line();
    if (size === undefined) return undefined;
    const n = Number(size.slice(1));
    if (buf.length < at + n + 2) return undefined;
    parts.push(Buffer.from(buf.subarray(at, at + n)));
    at += n + 2;
  }
  return [{ parts, line: Buffer.alloc(0), data: undefined }, at];
}

function split(line: Buffer, separator: number): Buffer[] {
  const parts: Buffer[] = [];
  let from = 0;
  for (let i = 0; i <= line.length; i++) {
    if (i === line.length || line[i] === separator) {
      if (i > from) parts.push(Buffer.from(line.subarray(from, i)));
      from = i + 1;
    }
  }
  return parts;
}

/** A bulk string reply. */
export function bulk(value: Uint8Array | string | null): Buffer {
  if (value === null) return Buffer.from("$-1\r\n");
  const bytes = Buffer.from(value);
  return Buffer.concat([Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from("\r\n")]);
}

/** A well-behaved answer to what the stores send (a miss for reads, success for writes), for the wire tests. */
export function politeAnswer(protocol: "memcached" | "redis"): Answer {
  if (protocol === "memcached") {
    return ({ parts }) => {
      const name = parts[0]?.toString();
      if (name === "mg") return "EN\r\n";
      if (name === "ms") return "HD\r\n";
      if (name === "mn") return "MN\r\n";
      return "NF\r\n";
    };
  }
  return ({ parts }) => {
    const name = parts[0]?.toString().toUpperCase();
    if (name === "GET") return "$-1\r\n";
    if (name === "MGET") return `*${parts.length - 1}\r\n${"$-1\r\n".repeat(parts.length - 1)}`;
    if (name === "SET") return "+OK\r\n";
    return ":0\r\n";
  };
}
