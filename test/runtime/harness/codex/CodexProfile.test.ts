/**
 * The dev Core's `codex` engine profile against the Codex adapter's declaration: a default dev Core Session
 * (Environment none, multi-agent disabled), one with function tools and one with multi-agent are admitted; every public feature the
 * declaration does not support is refused by the engine profile or the declaration, never guessed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import { admit, type AdmissionInput } from "../../../../src/core/CapabilityPolicy.js"
import { agentConfiguration, engineProfileFor } from "../../../../src/core/dev/SessionConfig.js"
import { codexCapabilities } from "../../../../src/runtime/harness/codex/CodexHarness.js"

const input = (configuration: Parameters<typeof agentConfiguration>[0]): AdmissionInput => ({
  operation: "execution",
  agent_kind: "codex",
  engine: engineProfileFor("codex"),
  agent: agentConfiguration(configuration),
  environment: { type: "none" },
  session: { has_started_turn: false, native_session_id: undefined },
  request: { message_images: false, function_result_images: false }
})

const declaration = Option.some({
  kinds: new Map([["codex", { kind: "codex", available: true, version: "0.171.0", capabilities: codexCapabilities }]])
})

describe("codex engine profile", () => {
  it("admits a default Session and one with function tools", () => {
    assert.isTrue(Result.isSuccess(admit(input({}), declaration)))
    const tools = [{ name: "lookup", description: "d", parameters: { type: "object" } }]
    assert.isTrue(Result.isSuccess(admit(input({ function_tools: tools }), declaration)))
  })

  it("admits multi-agent (sub-agent observations are declared and qualified)", () => {
    assert.isTrue(Result.isSuccess(admit(input({ multi_agent: { enabled: true } }), declaration)))
    const undeclared = Option.some({
      kinds: new Map([["codex", { kind: "codex", available: true, version: "0.171.0", capabilities: { ...codexCapabilities, subagent_observations: false } }]])
    })
    assert.isTrue(Result.isFailure(admit(input({ multi_agent: { enabled: true } }), undeclared)))
  })

  it("refuses what the declaration does not support", () => {
    for (const configuration of [
      { text_verbosity: "high" as const },
      { output_format: { type: "json_schema" as const, name: "x", schema: {} } },
      { disable_programmatic_tool_calling: true }
    ]) {
      assert.isTrue(Result.isFailure(admit(input(configuration as never), declaration)), JSON.stringify(configuration))
    }
  })
})
