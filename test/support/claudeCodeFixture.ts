/**
 * Claude Code against the fake Messages server, for real-binary tests: a fresh fake server and daemon state
 * directory per use (so fresh CLAUDE_CONFIG_DIRs), the pinned binary, retries off. Everything lives in the
 * enclosing Scope.
 */
import { Effect, Option, Redacted } from "effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import { makeClaudeCodeHarness } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import { type ClaudeCodeSettings, settingsFromEnv } from "../../src/runtime/harness/claude_code/ClaudeCodeSettings.js"
import { makeFakeAnthropic } from "./fakeAnthropic.js"

/** Every Claude Code pid the fixtures started (leak checks). */
/** A one-text input. */
export const say = (text: string): MessageInput => [{ content: [{ type: "input_text", text }] }]

/** The request configuration the Claude Code tests start from (the fake server's model, tool observations on). */
export const baseRequest: PromptRequestPayload = {
  agent_kind: "claude_code",
  conversation_id: "",
  run_id: "",
  agent_options: { model: "fake-model" },
  observe_tool_observations: true
}

export const spawnedClaudePids: Array<number> = []

/** A temp daemon state directory for the enclosing Scope. */
export const tempStateDir = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "agentwire-cc-"))),
  (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
)

/** Claude Code against a fresh fake server, for the enclosing Scope; `settings` overrides the test defaults. */
export const claudeCodeAgainstFake = (
  options: { readonly slowDeltas?: number; readonly settings?: Partial<ClaudeCodeSettings> } = {}
) =>
  Effect.gen(function* () {
    const fake = yield* makeFakeAnthropic({ slowDeltas: options.slowDeltas ?? 20, slowIntervalMs: 250 })
    const profileDir = yield* tempStateDir
    const settings = {
      ...settingsFromEnv({ PATH: process.env.PATH }, { profileDir, binaryPath: Option.none() }),
      apiKey: Option.some(Redacted.make("sk-ant-fake-test-key")),
      baseUrl: Option.some(fake.url),
      extraEnv: { CLAUDE_CODE_MAX_RETRIES: "0", API_TIMEOUT_MS: "20000" },
      observeSpawn: (pid: number) => void spawnedClaudePids.push(pid),
      ...options.settings
    }
    const harness = yield* makeClaudeCodeHarness(settings)
    return { harness, fake, profileDir }
  })

