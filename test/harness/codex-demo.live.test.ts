/**
 * `agentwire demo --harness codex` (what `npm start -- --harness codex` runs) with the bundled binary: the
 * embedded dev Core, a spawned daemon with the `codex` kind and the pinned real Codex binary, against the fake
 * Responses server. It must admit the Turn (the dev Core's codex engine profile against the Codex declaration),
 * complete it, never print the provider key, and say what is missing when Codex is not configured.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { run, stopAll, tempDir } from "../support/devcoreLive.js"
import { makeFakeResponses } from "../support/fakeResponses.js"
import { keyVar, providerConfig, secretKey } from "../support/fakeResponsesCodex.js"

const dir = tempDir("agentwire-demo-codex-")

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("agentwire demo --harness codex (end to end)", () => {
  it("runs the demo Turn through Codex and exits 0 without printing the key", async () => {
    const scope = Effect.runSync(Scope.make())
    const fake = await Effect.runPromise(Scope.provide(makeFakeResponses, scope))
    try {
      const demo = run(["demo", "--harness", "codex", "--prompt", "hello from the demo", "--data-dir", dir], {
        AGENTWIRE_CODEX_CONFIG: providerConfig(fake).join("\n"),
        [keyVar]: secretKey
      })
      const code = await demo.exited
      const log = readFileSync(join(dir, "daemon.log"), "utf8")
      assert.strictEqual(code, 0, demo.stdout + demo.stderr + log)
      assert.include(demo.stdout, "agent kind codex 0.171.0")
      assert.match(demo.stdout, /outcome: completed/)
      assert.include(demo.stdout, `content: "echo: hello from the demo"`)
      for (const text of [demo.stdout, demo.stderr, log]) assert.notInclude(text, secretKey)
      assert.strictEqual(fake.requests()[0]!.authorization, `Bearer ${secretKey}`)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 120_000)

  it("says what is missing when no model provider is configured", async () => {
    const demo = run(["demo", "--harness", "codex"], { AGENTWIRE_CODEX_CONFIG: "" })
    assert.strictEqual(await demo.exited, 1)
    assert.include(demo.stdout + demo.stderr, "the codex demo needs a model provider: set AGENTWIRE_CODEX_CONFIG")
  }, 60_000)

  it("names the reason when the daemon declares codex unavailable", async () => {
    const demo = run(["demo", "--harness", "codex", "--data-dir", `${dir}-missing`], {
      AGENTWIRE_CODEX_CONFIG: `model="m"`,
      AGENTWIRE_CODEX_PATH: join(dir, "no-such-codex")
    })
    try {
      assert.strictEqual(await demo.exited, 1)
      assert.include(demo.stdout + demo.stderr, "codex is unavailable on the daemon: codex did not report a version")
    } finally {
      rmSync(`${dir}-missing`, { recursive: true, force: true })
    }
  }, 60_000)
})
