// The end-to-end test's Next.js app (test/next.e2e.test.ts builds and starts it): its ISR cache goes to larder's
// cacheHandler when LARDER_NEXT_HANDLER names the handler's module (at `next start`; the build runs without one),
// and its article pages carry the Surrogate-Key that lets `larder serve` purge its own copy by the same tags.
const handler = process.env.LARDER_NEXT_HANDLER;

export default {
  ...(handler ? { cacheHandler: handler, cacheMaxMemorySize: 0 } : {}),
  poweredByHeader: false,
  async headers() {
    return [{ source: "/article/:id", headers: [{ key: "Surrogate-Key", value: "articles article-:id" }] }];
  },
};
