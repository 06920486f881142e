/**
 * The shared lifecycle suite run for the Claude Code adapter against the real binary (the pinned
 * `@anthropic-ai/claude-code` devDependency) and the fake Messages server on loopback. Each test gets its own
 * fake server, daemon state directory (so its own CLAUDE_CONFIG_DIRs) and Claude Code processes; no other
 * network is reachable from the configuration. Live clock: real processes.
 */
import { Effect } from "effect"
import type { ClaudeCodeExecutor } from "../../src/runtime/harness/claude_code/ClaudeCodeExecutor.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import { claudeCodeAgainstFake, spawnedClaudePids } from "../support/claudeCodeFixture.js"
import type { FakeAnthropic } from "../support/fakeAnthropic.js"
import { runLifecycleSuite } from "./HarnessLifecycleSuite.js"

const say = (text: string): MessageInput => [{ content: [{ type: "input_text", text }] }]
/** The fake of the running test (one per test). */
let fake: FakeAnthropic | undefined

runLifecycleSuite({
  name: "claude_code",
  nature: "real",
  live: true,
  timeout: 120_000,
  harness: Effect.map(claudeCodeAgainstFake(), (f) => {
    fake = f.fake
    return f.harness
  }),
  history: {
    lastModelRequest: Effect.sync(() =>
      JSON.stringify(fake?.requests.filter((r) => r.path === "/v1/messages").at(-1)?.body ?? null)
    ),
    recallMarker: "PLUM"
  },
  configuration: (overrides) => ({
    agent_kind: "claude_code",
    conversation_id: "",
    run_id: "",
    agent_options: { model: "fake-model" },
    observe_tool_observations: true,
    ...overrides
  }),
  functionConfiguration: {
    function_tools: [{ name: "lookup", description: "Looks a value up", parameters: { type: "object", properties: { key: { type: "string" } } } }]
  },
  inputs: {
    text: say("hello claude"),
    error: say("E429 please"),
    slow: say("SLOW please"),
    steer: say("and also this"),
    permission: say("TOOL please"),
    userChoice: say("ASK please"),
    functionCall: say("FUNC please"),
    recall: say("remember PLUM")
  },
  errorCode: "rate_limit_exceeded",
  nativePids: (executor) => [(executor as ClaudeCodeExecutor).pid],
  spawnedPids: Effect.sync(() => [...spawnedClaudePids]),
  unknownSession: "11111111-1111-4111-8111-111111111111"
})
