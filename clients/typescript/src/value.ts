// The values larder entries carry, as JavaScript can hold them without losing what other languages keep apart:
// `Float` marks a float64 whose value is integral (JavaScript's 1.0 is 1), bigint holds integers past 2^53,
// `Pairs` is a map whose order and duplicate keys are kept exactly (display, vectors), `Ext` an opaque
// MessagePack extension (pickle, Marshal: never interpreted here).

/** A float64, whatever its value: `new Float(1)` is written as the float 1.0, not the integer 1. */
export class Float {
  constructor(readonly value: number) {}
  valueOf(): number {
    return this.value;
  }
}

/** A MessagePack extension value (type -128..127 and its bytes), kept opaque. */
export class Ext {
  constructor(
    readonly type: number,
    readonly data: Uint8Array,
  ) {}
}

/** A map as its (key, value) pairs in order, duplicates included. */
export class Pairs {
  constructor(readonly entries: Array<[Value, Value]>) {}
}

export type Value =
  | null
  | undefined
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | Float
  | Ext
  | Pairs
  | Value[]
  | Map<Value, Value>
  | { [key: string]: Value };

/** Arrays and maps may nest this deep (FORMAT.md §2): the top-level value is level 0 and a container at level 100
 * or more is too deep, so 100 nested arrays are fine and 101 are refused. */
export const MAX_NESTING = 100;

export const INT64_MIN = -(2n ** 63n);
export const UINT64_MAX = 2n ** 64n - 1n;

/** Whether `value` is a plain object (a JSON object), not an array, Map, byte string or class instance. */
export function isPlainObject(value: unknown): value is { [key: string]: Value } {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Sets `object[key] = value` as an own property even for "__proto__", so hostile keys cannot change prototypes. */
export function setOwn(object: { [key: string]: Value }, key: string, value: Value): void {
  if (key === "__proto__") {
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    object[key] = value;
  }
}
