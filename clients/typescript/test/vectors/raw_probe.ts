// The runner's own probes of memcached and Redis for hostile_keys.json (spec/vectors/README.md): a socket that sends
// bytes written here from the README (`mg <wire bytes> v`, RESP `GET`, `DBSIZE`, `FLUSHALL`, `flush_all`) and reads
// one reply. It never sees a key as a string and shares no code with the stores' encoders, so a store that writes
// other bytes than it checked cannot pass by agreeing with itself.

import net from "node:net";

const CRLF = Buffer.from("\r\n");
const PROBE_TIMEOUT_MS = 5000;

/** "host:port" → [host, port]. */
function split(address: string): [string, number] {
  const colon = address.lastIndexOf(":");
  if (colon === -1) throw new Error(`${address} is not host:port`);
  return [address.slice(0, colon), Number(address.slice(colon + 1))];
}

/** Sends `request` and collects the answer until `complete(answer)` returns the reply's length. */
function exchange(address: string, request: Buffer, complete: (answer: Buffer) => number | undefined): Promise<Buffer> {
  const [host, port] = split(address);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    let answer = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no whole reply from ${address} within ${PROBE_TIMEOUT_MS} ms: ${show(answer)}`));
    }, PROBE_TIMEOUT_MS);
    socket.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on("data", (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
      const length = complete(answer);
      if (length === undefined) return;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer.subarray(0, length));
    });
    socket.on("close", () => {
      clearTimeout(timer);
      reject(new Error(`${address} closed the connection: ${show(answer)}`));
    });
    socket.write(request);
  });
}

function show(b: Buffer): string {
  return JSON.stringify(b.subarray(0, 120).toString("latin1"));
}

/** The length of a first line ending in CRLF, CRLF included. */
function lineEnd(answer: Buffer): number | undefined {
  const at = answer.indexOf(CRLF);
  return at === -1 ? undefined : at + 2;
}

// ---------------------------------------------------------------------------------------------------- memcached

/** `flush_all`: the server answers OK. */
export async function memcachedFlush(address: string): Promise<void> {
  const reply = await exchange(address, Buffer.from("flush_all\r\n"), lineEnd);
  if (reply.toString("latin1") !== "OK\r\n") throw new Error(`flush_all answered ${show(reply)}`);
}

/** `mg <key bytes> v`: the value, or undefined for `EN`. */
export async function memcachedGet(address: string, key: Uint8Array): Promise<Uint8Array | undefined> {
  const request = Buffer.concat([Buffer.from("mg "), Buffer.from(key), Buffer.from(" v\r\n")]);
  const reply = await exchange(address, request, (answer) => {
    const end = lineEnd(answer);
    if (end === undefined) return undefined;
    const m = /^VA (\d+)/.exec(answer.subarray(0, end).toString("latin1"));
    if (m === null) return end;
    const total = end + Number(m[1]) + 2;
    return answer.length >= total ? total : undefined;
  });
  const end = lineEnd(reply) as number;
  const head = reply.subarray(0, end).toString("latin1");
  if (head === "EN\r\n") return undefined;
  const m = /^VA (\d+)/.exec(head);
  if (m === null) throw new Error(`mg answered ${show(reply)}`);
  const value = reply.subarray(end, end + Number(m[1]));
  if (!reply.subarray(end + value.length).equals(CRLF)) throw new Error(`mg's value is not followed by CRLF`);
  return new Uint8Array(value);
}

// ---------------------------------------------------------------------------------------------------- Redis

/** A command as a RESP array of bulk strings. */
function resp(...args: Array<string | Uint8Array>): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = typeof arg === "string" ? Buffer.from(arg, "latin1") : Buffer.from(arg);
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, CRLF);
  }
  return Buffer.concat(parts);
}

/** One RESP reply of the kinds these commands answer: `+`, `-`, `:`, `$`. */
function oneReply(answer: Buffer): number | undefined {
  const end = lineEnd(answer);
  if (end === undefined) return undefined;
  if (answer[0] !== 0x24) return end; // not a bulk string: the line is the reply
  const length = Number(answer.subarray(1, end - 2).toString("latin1"));
  if (length < 0) return end;
  const total = end + length + 2;
  return answer.length >= total ? total : undefined;
}

async function redis(address: string, ...args: Array<string | Uint8Array>): Promise<Buffer> {
  return exchange(address, resp(...args), oneReply);
}

export async function redisFlush(address: string): Promise<void> {
  const reply = await redis(address, "FLUSHALL");
  if (reply.toString("latin1") !== "+OK\r\n") throw new Error(`FLUSHALL answered ${show(reply)}`);
}

/** `GET <key bytes>`: the value, or undefined for nil. */
export async function redisGet(address: string, key: Uint8Array): Promise<Uint8Array | undefined> {
  const reply = await redis(address, "GET", key);
  const end = lineEnd(reply) as number;
  const head = reply.subarray(0, end).toString("latin1");
  if (head === "$-1\r\n" || head === "_\r\n") return undefined;
  if (!head.startsWith("$")) throw new Error(`GET answered ${show(reply)}`);
  return new Uint8Array(reply.subarray(end, reply.length - 2));
}

export async function redisDbsize(address: string): Promise<number> {
  const reply = (await redis(address, "DBSIZE")).toString("latin1");
  const m = /^:(\d+)\r\n$/.exec(reply);
  if (m === null) throw new Error(`DBSIZE answered ${JSON.stringify(reply)}`);
  return Number(m[1]);
}
