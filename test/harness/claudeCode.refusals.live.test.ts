/**
 * What the `claude_code` kind declares `false` is refused before any native call (issue #15): a preparation that
 * asks for one of those capabilities is rejected `unsupported_configuration` by the Runtime, no Claude Code
 * process is started and the model server sees nothing. The same Runtime then prepares a plain configuration
 * (the control: the kind is available and the refusals are about the capabilities). In-memory transport, the
 * real binary, the fake Messages server.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { claudeCodeCapabilities } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"
import { claudeCodeAgainstFake, spawnedClaudePids } from "../support/claudeCodeFixture.js"
import { connect, next, prepareFrame, processLayer } from "../support/runtimeTestWire.js"

const claude: Partial<PromptRequestPayload> = { agent_kind: "claude_code", agent_options: { model: "fake-model" } }
const controls = { web_search: "disabled", text_verbosity: "medium" } as const

/** One request per capability the declaration marks false (and the capability it needs). */
const refused: ReadonlyArray<readonly [string, Partial<PromptRequestPayload>]> = [
  ["structured_output", { execution_controls: { ...controls, output_format: { type: "json_schema", schema: { type: "object" } } } }],
  ["text_verbosity", { execution_controls: { ...controls, text_verbosity: "high" } }],
  ["web_search_control", { execution_controls: { ...controls, web_search: "enabled" } }],
  ["programmatic_tool_calling_disable", { execution_controls: { ...controls, disable_programmatic_tool_calling: true } }],
  ["tool_search", {
    tool_search: true,
    function_tools: [{ name: "lookup", description: "Looks a value up", parameters: { type: "object" }, defer_loading: true }]
  }],
  ["subagent_observations", { observe_subagent_identities: true }]
]

describe("claude_code refuses what it does not declare, before any native call", () => {
  it.live("each undeclared capability is rejected unsupported_configuration with no process and no model request", () =>
    Effect.gen(function* () {
      const { harness, fake } = yield* claudeCodeAgainstFake()
      const spawnedBefore = spawnedClaudePids.length
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        for (const [capability, overrides] of refused) {
          assert.isFalse(claudeCodeCapabilities[capability as keyof typeof claudeCodeCapabilities], capability)
          yield* core.toRuntime(prepareFrame(`prep-${capability}`, { ...claude, ...overrides }))
          const status = (yield* next(core, "preparation_status")).payload
          assert.deepInclude(status, { state: "rejected", operation: "execution_prepare", error_code: "unsupported_configuration" }, capability)
        }
        assert.strictEqual(spawnedClaudePids.length, spawnedBefore, "no Claude Code process was started")
        assert.deepStrictEqual(fake.requests, [], "the model server saw nothing")
        // The control: a configuration within the declaration is prepared (a process starts).
        yield* core.toRuntime(prepareFrame("prep-plain", claude))
        const states = [(yield* next(core, "preparation_status")).payload.state, (yield* next(core, "preparation_status")).payload.state]
        assert.deepStrictEqual(states, ["preparing", "ready"])
        assert.strictEqual(spawnedClaudePids.length, spawnedBefore + 1)
      }).pipe(Effect.provide(processLayer({ harnesses: [harness] })))
    }), 90_000)
})
