// memcached server selection: classic ketama (STORES.md §4.2), the continuum every language builds alike, so
// every process given the same URL sends a key to the same server. spec/vectors/ring.json pins it.

import { createHash } from "node:crypto";

export const POINTS_PER_SERVER = 160;

export interface RingServer {
  /** The host exactly as written in the URL (an IPv6 address keeps its brackets). */
  host: string;
  port: number;
  weight?: number;
}

function pointName(s: RingServer, n: number): string {
  return s.port === 11211 ? `${s.host}-${n}` : `${s.host}:${s.port}-${n}`;
}

/** The first four bytes of MD5(key), little-endian. */
export function keyHash(key: string): number {
  return createHash("md5").update(key, "utf8").digest().readUInt32LE(0);
}

export class Ring {
  /** [value, server index] sorted by (value, index). */
  readonly points: Array<[number, number]>;
  private readonly values: Uint32Array;
  private readonly owners: Uint16Array;
  private readonly only: number | undefined;

  /** The continuum over the servers `include` admits; indexes are into the full list. */
  constructor(servers: readonly RingServer[], include: (index: number) => boolean = () => true) {
    const members = servers.map((s, i) => [i, s] as const).filter(([i]) => include(i));
    const total = members.reduce((sum, [, s]) => sum + (s.weight ?? 1), 0);
    const points: Array<[number, number]> = [];
    for (const [index, server] of members) {
      const count = Math.floor(((((server.weight ?? 1) / total) * POINTS_PER_SERVER) / 4) * members.length + 1e-10) * 4;
      for (let n = 0; n < count / 4; n++) {
        const digest = createHash("md5").update(pointName(server, n), "utf8").digest();
        for (let x = 0; x < 4; x++) points.push([digest.readUInt32LE(4 * x), index]);
      }
    }
    points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.points = points;
    this.values = Uint32Array.from(points, (p) => p[0]);
    this.owners = Uint16Array.from(points, (p) => p[1]);
    this.only = members.length === 1 ? members[0]?.[0] : undefined;
  }

  /** The index of the server for a stored key, or undefined when no server is on the ring. */
  serverFor(key: string): number | undefined {
    if (this.only !== undefined) return this.only;
    if (this.values.length === 0) return undefined;
    return this.serverForHash(keyHash(key));
  }

  serverForHash(hash: number): number | undefined {
    const values = this.values;
    if (values.length === 0) return undefined;
    let lo = 0;
    let hi = values.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((values[mid] as number) < hash) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === values.length ? 0 : lo];
  }
}
