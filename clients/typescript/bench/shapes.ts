// The structured values the client benchmarks cache beside strings (issue 34): what a web app keeps, shaped as it
// keeps it. A query result (an object holding an array of small records: numbers, strings, null, booleans) of about
// 1 KiB and 64 KiB of JSON, a nested document, and a rendered page (a string). Deterministic: every run and every
// contender caches the same values.

export type Shaped = { [key: string]: unknown } | string;

/** One row of a query result, as an ORM's `values()` gives it. */
function record(i: number): { [key: string]: unknown } {
  return {
    id: 100_000 + i,
    name: `Customer ${i}`,
    score: Math.round(((i * 37) % 1000) * 1.7) / 10,
    active: i % 3 !== 0,
    parent: i % 5 === 0 ? null : 1000 + (i % 17),
  };
}

/** A query result of `rows` records, with the paging fields around it. */
export function queryResult(rows: number): { [key: string]: unknown } {
  return { count: rows, next: null, previous: null, results: Array.from({ length: rows }, (_, i) => record(i)) };
}

/** A nested document (a product page's data): objects in objects, arrays of objects and of numbers. */
export function nestedDocument(): { [key: string]: unknown } {
  return {
    id: 4711,
    title: "Stainless steel kettle, 1.7 l",
    price: { amount: 49.9, currency: "EUR", discounted: false },
    tags: ["kitchen", "kettle", "steel", "electric"],
    ratings: { average: 4.4, count: 318, histogram: [3, 9, 21, 96, 189] },
    variants: Array.from({ length: 8 }, (_, i) => ({
      sku: `KT-17-${i}`,
      color: ["steel", "black", "white", "red"][i % 4],
      stock: i * 3,
      dims: { w: 22.5, h: 25, d: 16.5 },
      images: [`/img/kt17-${i}-front.jpg`, `/img/kt17-${i}-side.jpg`],
    })),
    seller: { id: 17, name: "Homeware GmbH", verified: true, address: { city: "Köln", zip: "50667" } },
    description: "Boils 1.7 l in under four minutes. ".repeat(6),
  };
}

/** A rendered page (HTML) of about `bytes` bytes. */
export function renderedPage(bytes: number): string {
  const head = "<!doctype html><html><head><title>Orders</title></head><body><table>";
  let body = "";
  for (let i = 0; body.length + head.length < bytes - 30; i++)
    body += `<tr><td>${100_000 + i}</td><td>Customer ${i}</td><td class="n">${(i * 7) % 1000}.50</td></tr>\n`;
  return `${head}${body}</table></body></html>`;
}

/** The shapes of every structured-value figure, by name: ~1 KiB and ~64 KiB query results, the document, a page. */
export function shapes(): Array<[string, Shaped]> {
  return [
    ["query 1KiB", queryResult(13)],
    ["query 64KiB", queryResult(830)],
    ["document", nestedDocument()],
    ["page 64KiB", renderedPage(65536)],
  ];
}
