/**
 * `agentwire demo --harness claude_code` (what `npm start -- --harness claude_code` runs) end to end: the embedded
 * dev Core, the real daemon binary (`dist/agentwire.mjs daemon`, spawned by the demo) with the `claude_code` kind
 * and the pinned real Claude Code binary, against the fake Messages server this test starts. The Turn must be
 * admitted (the dev Core's claude_code engine profile against the declaration), complete, and never print the
 * key; without a key or with a wrong binary the demo says what is missing.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { run, stopAll, tempDir } from "../support/devcoreLive.js"
import { makeFakeAnthropic } from "../support/fakeAnthropic.js"

const dir = tempDir("agentwire-demo-claude-")
const secretKey = "sk-ant-demo-secret-5b1e9c"

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("agentwire demo --harness claude_code (end to end)", () => {
  it("runs the demo Turn through Claude Code and exits 0 without printing the key", async () => {
    const scope = Effect.runSync(Scope.make())
    const fake = await Effect.runPromise(Scope.provide(makeFakeAnthropic(), scope))
    try {
      const demo = run(["demo", "--harness", "claude_code", "--prompt", "hello from the demo", "--data-dir", dir], {
        ANTHROPIC_API_KEY: secretKey,
        ANTHROPIC_AUTH_TOKEN: "",
        ANTHROPIC_BASE_URL: fake.url,
        ANTHROPIC_MODEL: "fake-model"
      })
      const code = await demo.exited
      const log = readFileSync(join(dir, "daemon.log"), "utf8")
      assert.strictEqual(code, 0, demo.stdout + demo.stderr + log)
      assert.match(demo.stdout, /agent kind claude_code 2\.1\.332/)
      assert.match(demo.stdout, /outcome: completed/)
      assert.include(demo.stdout, `content: "echo: hello from the demo"`)
      for (const text of [demo.stdout, demo.stderr, log]) assert.notInclude(text, secretKey)
      assert.deepStrictEqual(fake.prompts(), ["hello from the demo"])
      assert.isTrue(fake.requests.filter((r) => r.path === "/v1/messages").every((r) => r.auth === "x-api-key"))
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 120_000)

  it("says what is missing when no model key is configured", async () => {
    const demo = run(["demo", "--harness", "claude_code"], { ANTHROPIC_API_KEY: "", ANTHROPIC_AUTH_TOKEN: "" })
    assert.strictEqual(await demo.exited, 1)
    assert.include(demo.stdout + demo.stderr, "the claude_code demo needs a model key: set ANTHROPIC_API_KEY")
  }, 60_000)

  it("names the reason when the daemon declares claude_code unavailable", async () => {
    const demo = run(["demo", "--harness", "claude_code", "--data-dir", `${dir}-missing`], {
      ANTHROPIC_API_KEY: secretKey,
      AGENTWIRE_CLAUDE_CODE_PATH: join(dir, "no-such-claude")
    })
    try {
      assert.strictEqual(await demo.exited, 1)
      assert.include(demo.stdout + demo.stderr, "claude_code is unavailable on the daemon: the configured Claude Code binary is missing")
      assert.notInclude(demo.stdout + demo.stderr, secretKey)
    } finally {
      rmSync(`${dir}-missing`, { recursive: true, force: true })
    }
  }, 60_000)
})
