// RFC 8941 Structured Field Dictionaries, the syntax of targeted cache fields such as CDN-Cache-Control (RFC 9213,
// spec/HTTP.md §1.4.2). Strict, of the version RFC 9213 is defined on (no Date `@…` or Display String `%"…"`).
// Parameters are parsed (a syntax error in one fails the field) and dropped. A repeated key keeps its last value.

export class InvalidField extends Error {
  override readonly name = "InvalidField";
}

/** A Token (a string that is not a String). */
export class Token {
  constructor(readonly text: string) {}
}
/** A Decimal, kept as its text (no cache directive takes one). */
export class SfDecimal {
  constructor(readonly text: string) {}
}
export class InnerList {
  constructor(readonly items: SfValue[]) {}
}
export type SfValue = number | boolean | string | Uint8Array | Token | SfDecimal | InnerList;

const KEY = /[a-z*][a-z0-9_\-.*]*/y;
const TOKEN = /[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*/y;
const NUMBER = /-?([0-9]+)(\.[0-9]*)?/y;
const BYTES = /:([A-Za-z0-9+/=]*):/y;

/** The members of a Dictionary field value (its lines joined with ", "); throws InvalidField. */
export function parseDictionary(text: string): Map<string, SfValue> {
  if (!/^[\x20-\x7e\t]*$/.test(text)) throw new InvalidField("not visible ASCII");
  return new Parser(text).dictionary();
}

class Parser {
  at = 0;
  constructor(readonly text: string) {}

  peek(): string {
    return this.text[this.at] ?? "";
  }
  skip(chars: string): void {
    while (this.at < this.text.length && chars.includes(this.text[this.at] as string)) this.at++;
  }
  match(re: RegExp): RegExpExecArray | null {
    re.lastIndex = this.at;
    return re.exec(this.text);
  }

  dictionary(): Map<string, SfValue> {
    this.skip(" ");
    const members = new Map<string, SfValue>();
    while (this.at < this.text.length) {
      const key = this.key();
      let value: SfValue;
      if (this.peek() === "=") {
        this.at++;
        value = this.itemOrInnerList();
      } else {
        value = true;
        this.parameters();
      }
      members.delete(key);
      members.set(key, value);
      this.skip(" \t");
      if (this.at >= this.text.length) break;
      if (this.peek() !== ",") throw new InvalidField(`expected a comma at ${this.at}`);
      this.at++;
      this.skip(" \t");
      if (this.at >= this.text.length) throw new InvalidField("a trailing comma");
    }
    return members;
  }

  key(): string {
    const found = this.match(KEY);
    if (found === null) throw new InvalidField(`expected a key at ${this.at}`);
    this.at += found[0].length;
    return found[0];
  }

  itemOrInnerList(): SfValue {
    if (this.peek() !== "(") {
      const value = this.bareItem();
      this.parameters();
      return value;
    }
    this.at++;
    const items: SfValue[] = [];
    for (;;) {
      this.skip(" ");
      if (this.peek() === ")") {
        this.at++;
        this.parameters();
        return new InnerList(items);
      }
      items.push(this.bareItem());
      this.parameters();
      if (this.peek() !== " " && this.peek() !== ")")
        throw new InvalidField(`an inner list needs a space or ')' at ${this.at}`);
    }
  }

  parameters(): void {
    while (this.peek() === ";") {
      this.at++;
      this.skip(" ");
      this.key();
      if (this.peek() === "=") {
        this.at++;
        this.bareItem();
      }
    }
  }

  bareItem(): SfValue {
    const c = this.peek();
    if (c !== "" && "-0123456789".includes(c)) return this.number();
    if (c === '"') return this.string();
    if (c === ":") return this.byteSequence();
    if (c === "?") return this.boolean();
    const found = this.match(TOKEN);
    if (found === null) throw new InvalidField(`no item at ${this.at}`);
    this.at += found[0].length;
    return new Token(found[0]);
  }

  number(): number | SfDecimal {
    const found = this.match(NUMBER);
    if (found === null) throw new InvalidField(`expected a digit at ${this.at}`);
    const whole = found[1] as string;
    const fraction = found[2];
    if (fraction === undefined) {
      if (whole.length > 15) throw new InvalidField("an integer of more than 15 digits");
      this.at += found[0].length;
      return Number(found[0]);
    }
    if (whole.length > 12 || fraction.length < 2 || fraction.length > 4)
      throw new InvalidField("a decimal of more than 12 digits, or without 1-3 after the point");
    this.at += found[0].length;
    return new SfDecimal(found[0]);
  }

  string(): string {
    this.at++;
    let out = "";
    while (this.at < this.text.length) {
      const c = this.text[this.at++] as string;
      if (c === "\\") {
        const escaped = this.peek();
        if (escaped !== '"' && escaped !== "\\") throw new InvalidField('an escape other than \\" or \\\\');
        out += escaped;
        this.at++;
      } else if (c === '"') return out;
      else if (c === "\t") throw new InvalidField("a tab in a string");
      else out += c;
    }
    throw new InvalidField("an unterminated string");
  }

  byteSequence(): Uint8Array {
    const found = this.match(BYTES);
    if (found === null) throw new InvalidField(`a byte sequence outside base64, or unterminated, at ${this.at}`);
    this.at += found[0].length;
    return base64(found[1] as string);
  }

  boolean(): boolean {
    const value = this.text.slice(this.at + 1, this.at + 2);
    if (value !== "0" && value !== "1") throw new InvalidField(`a boolean is ?0 or ?1, at ${this.at}`);
    this.at += 2;
    return value === "1";
  }
}

/** Base64 with all, some or none of its padding, but never `=` inside, more `=` than needed, or an impossible
 * length (as the front's parser reads it). */
function base64(content: string): Uint8Array {
  const data = content.replace(/=+$/, "");
  const padding = content.length - data.length;
  const needed = (4 - (data.length % 4)) % 4;
  if (data.includes("=") || data.length % 4 === 1 || padding > needed) throw new InvalidField("not base64");
  return new Uint8Array(Buffer.from(data, "base64"));
}
