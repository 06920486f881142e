/**
 * The shared lifecycle suite run for the Codex adapter against the real binary (the pinned `@openai/codex`
 * devDependency, `codex app-server` over stdio) and the fake Responses server on loopback. Each test gets its own
 * fake server and daemon profile (so its own CODEX_HOMEs); the provider key reaches Codex only through the
 * environment (`env_key`). Live clock: real processes.
 */
import { Effect } from "effect"
import type { CodexExecutor } from "../../src/runtime/harness/codex/CodexExecutor.js"
import type { FakeResponses } from "../support/fakeResponses.js"
import { codexFixture, groupMembers, spawnedCodexPids, text } from "../support/fakeResponsesCodex.js"
import { runLifecycleSuite } from "./HarnessLifecycleSuite.js"

/** The fake of the running test (one per test). */
let fake: FakeResponses | undefined

runLifecycleSuite({
  name: "codex",
  nature: "real",
  live: true,
  timeout: 120_000,
  harness: Effect.map(codexFixture, (f) => {
    fake = f.fake
    return f.harness
  }),
  history: {
    lastModelRequest: Effect.sync(() => JSON.stringify(fake?.requests().at(-1)?.body ?? null)),
    recallMarker: "PLUM"
  },
  configuration: (overrides) => ({
    agent_kind: "codex",
    conversation_id: "",
    run_id: "",
    execution_controls: { web_search: "disabled", text_verbosity: "medium" },
    observe_messages: true,
    observe_tool_observations: true,
    ...overrides
  }),
  functionConfiguration: {
    function_tools: [{ name: "lookup", description: "Looks a value up", parameters: { type: "object", properties: { q: { type: "string" } } } }]
  },
  inputs: {
    text: text("hello codex"),
    error: text("E429 please"),
    slow: text("SLOW please"),
    steer: text("and also this"),
    permission: text("SHELL:echo lifecycle"),
    userChoice: text("RUI please"),
    functionCall: text("DYN:lookup"),
    recall: text("remember PLUM")
  },
  errorCode: "rate_limit_exceeded",
  // The npm launcher (the group leader) and the native app-server it starts.
  nativePids: (executor) => {
    const leader = (executor as CodexExecutor).pid
    return [leader, ...groupMembers(leader).filter((pid) => pid !== leader)]
  },
  spawnedPids: Effect.sync(() => [...spawnedCodexPids]),
  unknownSession: "01a23224-0000-7000-8000-000000000000"
})
