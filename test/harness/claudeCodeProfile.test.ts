/**
 * The dev Core's engine profile for `claude_code` qualifies exactly the public features and controls the
 * adapter's declaration supports (issue #15).
 */
import { assert, describe, it } from "@effect/vitest"
import type { CapabilityName } from "../../src/proto/Capabilities.js"
import { type PublicFeature, publicFeatures } from "../../src/core/CapabilityPolicy.js"
import { engineProfileFor } from "../../src/core/dev/SessionConfig.js"
import { claudeCodeCapabilities } from "../../src/runtime/harness/claude_code/ClaudeCodeHarness.js"

const capabilityOf: Record<PublicFeature, CapabilityName> = {
  structured_output: "structured_output",
  multi_agent: "subagent_observations",
  tool_search: "tool_search",
  programmatic_tool_calling_disable: "programmatic_tool_calling_disable",
  function_tools: "function_tools",
  message_images: "message_images",
  function_result_images: "function_result_images",
  mcp_http_tools: "mcp_http_tools",
  mcp_http_required: "mcp_http_required",
  mcp_http_bearer_auth: "mcp_http_bearer_auth"
}

describe("claude_code engine profile", () => {
  it("qualifies a public feature exactly when the declaration supports it", () => {
    const profile = engineProfileFor("claude_code")
    for (const feature of publicFeatures) {
      assert.strictEqual(profile.qualifies.has(feature), claudeCodeCapabilities[capabilityOf[feature]], feature)
    }
  })

  it("declares a control exactly when the declaration supports it", () => {
    const profile = engineProfileFor("claude_code")
    assert.strictEqual(profile.controls.web_search, claudeCodeCapabilities.web_search_control)
    assert.strictEqual(profile.controls.text_verbosity, claudeCodeCapabilities.text_verbosity)
  })
})
