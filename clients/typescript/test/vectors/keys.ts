// keys.json (FORMAT.md §5): request keys, safe keys, namespaced keys, and the variant and alternate keys through
// the helpers every language offers. Case names are prefixed with their section, as the other runners name them.

import { alternateKey, DEFAULT_DROP, namespacedKey, safeKey, urlKey, urlKeys, variantKey } from "../../src/keys.js";
import type { ContentEncoding } from "../../src/response.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, section, str, vectorBytes } from "./common.js";

export function cases(document: Value): Case[] {
  const sections: Array<[string, (c: Value) => void]> = [
    ["http", checkHttp],
    [
      "safe",
      (c) => {
        const got = safeKey(str(get(c, "key"), "key"));
        assert(got === get(c, "safe"), got);
      },
    ],
    [
      "namespaced",
      (c) => {
        const got = namespacedKey(str(get(c, "namespace"), "namespace"), str(get(c, "key"), "key"));
        assert(got === get(c, "full"), got);
      },
    ],
    ["variants", checkVariant],
    [
      "alternates",
      (c) => {
        const entryKey = str(get(c, "entry_key"), "entry_key");
        const got = alternateKey(entryKey, str(get(c, "coding"), "coding") as ContentEncoding);
        assert(got === get(c, "alternate_key"), got);
        assert(urlKeys(entryKey).includes(got), "urlKeys holds every alternate of the key");
      },
    ],
  ];
  return sections.flatMap(([name, check]) => each(section(document, name), check, `${name}/`));
}

function checkHttp(c: Value): void {
  const drop = get(c, "drop");
  const got = urlKey(str(get(c, "method"), "method"), str(get(c, "url"), "url"), {
    namespace: (get(c, "namespace") ?? "") as string,
    drop: drop === undefined ? DEFAULT_DROP : list(drop, "drop").map((d) => str(d, "drop")),
  });
  assert(got === get(c, "key"), got);
}

function checkVariant(c: Value): void {
  const lines = list(get(c, "request_headers"), "request_headers").map((line) => {
    const [n, v] = list(line, "line") as [Value, Value];
    return [str(n, "name"), vectorBytes(v)] as const;
  });
  const got = variantKey(str(get(c, "base_key"), "base_key"), get(c, "marker") as Map<unknown, unknown>, lines);
  assert(got === get(c, "variant_key"), JSON.stringify(got));
}
