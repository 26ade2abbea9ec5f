// The end-to-end test's Next.js app (test/next_e2e.test.ts builds and starts it): at `next start` with
// LARDER_NEXT_STORE set, its ISR and data cache go to larder's cacheHandler, named as an app names it (the package's
// `larder-cache/next` export; the app is built inside the package, so the name resolves to its dist/); the build
// runs without one. Its article pages carry the Surrogate-Key that lets `larder serve` purge its copy by the same tags.
const handler = process.env.LARDER_NEXT_STORE ? import.meta.resolve("larder-cache/next") : undefined;

export default {
  ...(handler ? { cacheHandler: handler, cacheMaxMemorySize: 0 } : {}),
  poweredByHeader: false,
  async headers() {
    return [{ source: "/article/:id", headers: [{ key: "Surrogate-Key", value: "articles article-:id" }] }];
  },
};
