import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Vitest's default in a run is one worker fewer than the CPUs: a single worker on the 2-core machines, so
    // every file ran after the other while most live files wait on child processes. Two workers keep both
    // cores busy (no test binds a fixed port; PostgreSQL tests each use their own schema).
    maxWorkers: 2
  }
})
