// vitest runs only Keyv's own suite (@keyv/test-suite is written for vitest); everything else runs on node:test.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: { include: ["test/keyv/*.spec.ts"], testTimeout: 20_000, hookTimeout: 30_000 },
});
