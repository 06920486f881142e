/**
 * The shared lifecycle suite run for the Claude Code adapter against the real binary (the pinned
 * `@anthropic-ai/claude-code` devDependency) and the fake Messages server on loopback. Each test gets its own
 * fake server, daemon state directory (so its own CLAUDE_CONFIG_DIRs) and Claude Code processes; no other
 * network is reachable from the configuration. Live clock: real processes.
 */
import { Effect, Option, Redacted } from "effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { makeClaudeCodeHarness } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import type { ClaudeCodeExecutor } from "../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import { settingsFromEnv } from "../../src/runtime/harness/claude_code/ClaudeCodeSettings.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import { makeFakeAnthropic } from "../support/fakeAnthropic.js"
import { runLifecycleSuite } from "./HarnessLifecycleSuite.js"

const say = (text: string): MessageInput => [{ content: [{ type: "input_text", text }] }]
const spawned: Array<number> = []

/** A temp daemon state directory for the enclosing Scope. */
export const tempStateDir = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "agentwire-cc-"))),
  (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
)

/** Claude Code against a fresh fake server, for the enclosing Scope. */
export const claudeCodeAgainstFake = (options: { readonly slowDeltas?: number } = {}) =>
  Effect.gen(function* () {
    const fake = yield* makeFakeAnthropic({ slowDeltas: options.slowDeltas ?? 20, slowIntervalMs: 250 })
    const profileDir = yield* tempStateDir
    const settings = {
      ...settingsFromEnv({ PATH: process.env.PATH }, { profileDir, binaryPath: Option.none() }),
      apiKey: Option.some(Redacted.make("sk-ant-fake-test-key")),
      baseUrl: Option.some(fake.url),
      extraEnv: { CLAUDE_CODE_MAX_RETRIES: "0", API_TIMEOUT_MS: "20000" },
      observeSpawn: (pid: number) => void spawned.push(pid)
    }
    const harness = yield* makeClaudeCodeHarness(settings)
    return { harness, fake, profileDir }
  })

runLifecycleSuite({
  name: "claude_code",
  nature: "real",
  live: true,
  timeout: 120_000,
  harness: Effect.map(claudeCodeAgainstFake(), ({ harness }) => harness),
  configuration: (overrides) => ({
    agent_kind: "claude_code",
    conversation_id: "",
    run_id: "",
    agent_options: { model: "fake-model" },
    observe_tool_observations: true,
    ...overrides
  }),
  functionConfiguration: {},
  inputs: {
    text: say("hello claude"),
    error: say("E429 please"),
    slow: say("SLOW please"),
    steer: say("and also this"),
    permission: say("TOOL please"),
    userChoice: say("ASK please"),
    functionCall: say("FUNC please")
  },
  errorCode: "rate_limit_exceeded",
  nativePids: (executor) => [(executor as ClaudeCodeExecutor).pid],
  spawnedPids: Effect.sync(() => [...spawned]),
  unknownSession: "11111111-1111-4111-8111-111111111111"
})
