/**
 * The shared lifecycle suite run for the scripted adapter: a controlled transport (no processes, no model),
 * so it proves the contract shape only. Runs on the TestClock.
 */
import { Effect } from "effect"
import { makeScriptedHarness } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import { runLifecycleSuite } from "./HarnessLifecycleSuite.js"

const script = (steps: ReadonlyArray<unknown>): MessageInput => [
  { content: [{ type: "input_text", text: JSON.stringify({ script: steps }) }] }
]

runLifecycleSuite({
  name: "scripted",
  nature: "controlled",
  live: false,
  timeout: 10_000,
  harness: makeScriptedHarness().pipe(Effect.provide(ScriptedSignals.layer)),
  configuration: (overrides) => ({
    agent_kind: "scripted",
    conversation_id: "",
    run_id: "",
    observe_tool_observations: true,
    ...overrides
  }),
  functionConfiguration: {
    function_tools: [{ name: "lookup", description: "looks a value up", parameters: { type: "object" } }]
  },
  inputs: {
    text: script([{ delta: "hello " }, { delta: "world" }, { usage: { input_tokens: 50, output_tokens: 12 } }]),
    error: script([{ delta: "partial" }, { error: { message: "rate limited", code: "rate_limit_exceeded" } }]),
    slow: script([{ delta: "partial" }, { await_steer: 1 }, { delta: " end" }]),
    steer: [{ content: [{ type: "input_text", text: "steered" }] }],
    permission: script([{ permission: { tool: "Bash", title: "run a command" } }]),
    userChoice: script([{ ask: { questions: [{ id: "q0", question: "Which color?", options: [{ label: "Blue" }] }] } }]),
    functionCall: script([{ function_call: { name: "lookup", arguments: { key: "k" } } }]),
    recall: script([{ delta: "remember" }, { usage: { input_tokens: 1, output_tokens: 1 } }])
  },
  errorCode: "rate_limit_exceeded",
  nativePids: () => [],
  spawnedPids: Effect.succeed([]),
  unknownSession: "00000000-0000-4000-8000-000000000000",
  notExercised: {
    unknown_session: "the scripted adapter keeps no native history, so it cannot tell a known session from an unknown one"
  }
})
