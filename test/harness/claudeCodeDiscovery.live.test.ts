/**
 * Discovery of the `claude_code` kind at daemon start: it can only make the kind unavailable, always with the
 * complete capability record and a reason; the pinned binary with a key is available at its version.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { claudeCodeCapabilities, makeClaudeCodeHarness } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import { resolveBinary, settingsFromEnv } from "../../src/runtime/harness/claude_code/ClaudeCodeSettings.js"
import { validateDeclaration } from "../../src/runtime/harness/HarnessRegistry.js"
import { withPreparationServices } from "../support/preparationServices.js"

const base = settingsFromEnv({ PATH: process.env.PATH, ANTHROPIC_API_KEY: "sk-ant-discovery" }, {
  profileDir: "/nonexistent-profile",
  binaryPath: Option.none()
})

describe("ClaudeCode discovery", () => {
  it.live("the pinned binary with a key is available at its version with the full declaration", () =>
    Effect.gen(function* () {
      const harness = yield* makeClaudeCodeHarness(base)
      assert.deepStrictEqual(harness.declaration, {
        kind: "claude_code",
        available: true,
        version: "2.1.332",
        capabilities: claudeCodeCapabilities
      })
      assert.strictEqual(validateDeclaration(harness.declaration)._tag, "Success")
    }), 60_000)

  it.live("without a key, a missing binary or no settings it is unavailable with a reason and the same record", () =>
    Effect.gen(function* () {
      const noKey = yield* makeClaudeCodeHarness({ ...base, apiKey: Option.none() })
      const missing = yield* makeClaudeCodeHarness({ ...base, binaryPath: Option.some("/nonexistent/claude") })
      const unconfigured = yield* makeClaudeCodeHarness(undefined)
      for (const harness of [noKey, missing, unconfigured]) {
        assert.isFalse(harness.declaration.available)
        assert.deepStrictEqual(harness.declaration.capabilities, claudeCodeCapabilities)
        assert.isString(harness.declaration.unavailableReason)
        assert.notInclude(harness.declaration.unavailableReason!, "sk-ant")
      }
      assert.strictEqual(noKey.declaration.version, "2.1.332")
      assert.include(noKey.declaration.unavailableReason!, "ANTHROPIC_API_KEY")
      assert.include(missing.declaration.unavailableReason!, "--claude-code-path")
      const exit = yield* Effect.exit(Effect.scoped(withPreparationServices(noKey.prepare({
        executorId: "e" as never,
        sessionId: undefined,
        configuration: { agent_kind: "claude_code", conversation_id: "", run_id: "" },
        declaration: noKey.declaration
      }))))
      assert.strictEqual(exit._tag, "Failure")
    }), 60_000)

  it.live("a binary older than 2.1.332, or one whose --version fails, is unavailable with a reason and the same record", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-cc-versions-"))),
        (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
      )
      const script = (name: string, body: string) => {
        const file = Path.join(dir, name)
        Fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o700 })
        return Option.some(file)
      }
      const older = yield* makeClaudeCodeHarness({ ...base, binaryPath: script("old-claude", "echo '2.1.331 (Claude Code)'") })
      const broken = yield* makeClaudeCodeHarness({ ...base, binaryPath: script("broken-claude", "exit 1") })
      const newer = yield* makeClaudeCodeHarness({ ...base, binaryPath: script("new-claude", "echo '2.2.0 (Claude Code)'") })
      for (const harness of [older, broken]) {
        assert.isFalse(harness.declaration.available)
        assert.deepStrictEqual(harness.declaration.capabilities, claudeCodeCapabilities)
      }
      assert.strictEqual(older.declaration.version, "2.1.331")
      assert.include(older.declaration.unavailableReason!, "older than 2.1.332")
      assert.include(broken.declaration.unavailableReason!, "did not report a version")
      // A newer version is accepted; discovery never adds a capability.
      assert.deepStrictEqual(newer.declaration, { kind: "claude_code", available: true, version: "2.2.0", capabilities: claudeCodeCapabilities })
    }), 60_000)

  it("finds the binary in order: configured, the Agent SDK's bundled one, the claude-code package's, then claude on PATH", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-cc-path-"))
    try {
      const onPath = Path.join(dir, "claude")
      Fs.writeFileSync(onPath, "#!/bin/sh\n", { mode: 0o700 })
      const settings = { ...base, searchPath: `/nonexistent-bin${Path.delimiter}${dir}` }
      const sdk = `@anthropic-ai/claude-agent-sdk-${process.platform}-${process.arch}/claude`
      const installed = (found: ReadonlyArray<string>) => (specifier: string) =>
        found.includes(specifier) ? Option.some(`/pkg/${specifier}`) : Option.none()
      const both = installed([sdk, "@anthropic-ai/claude-code/bin/claude.exe"])
      assert.deepStrictEqual(resolveBinary({ ...settings, binaryPath: Option.some(onPath) }, both), Option.some({ path: onPath, source: "configured" }))
      assert.deepStrictEqual(resolveBinary(settings, both), Option.some({ path: `/pkg/${sdk}`, source: "agent-sdk" }))
      assert.deepStrictEqual(
        resolveBinary(settings, installed(["@anthropic-ai/claude-code/bin/claude.exe"])),
        Option.some({ path: "/pkg/@anthropic-ai/claude-code/bin/claude.exe", source: "claude-code-package" })
      )
      assert.deepStrictEqual(resolveBinary(settings, installed([])), Option.some({ path: onPath, source: "PATH" }))
      assert.deepStrictEqual(resolveBinary({ ...settings, searchPath: "/nonexistent-bin" }, installed([])), Option.none())
      // The real resolution here: the pinned devDependency's binary.
      assert.strictEqual(Option.getOrThrow(resolveBinary(settings)).source, "claude-code-package")
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("holds the keys Redacted", () => {
    assert.isTrue(Option.isSome(base.apiKey))
    assert.notInclude(String(base.apiKey), "sk-ant-discovery")
    assert.strictEqual(Redacted.value(Option.getOrThrow(base.apiKey)), "sk-ant-discovery")
  })
})
