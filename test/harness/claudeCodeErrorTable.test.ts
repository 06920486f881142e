/**
 * The Claude Code error table (docs/harness-claude-code.md "Engine errors"): every row on its own, precedence,
 * unclassified cases, and an error frame built only from structured facts.
 */
import { assert, describe, it } from "@effect/vitest"
import { classify, errorPayload, errorTable, type NativeErrorFacts } from "../../src/runtime/harness/claude_code/ErrorTable.js"

const none: NativeErrorFacts = { terminalReason: undefined, apiErrorStatus: undefined, apiErrorType: undefined, assistantError: undefined }
const facts = (f: Partial<NativeErrorFacts>): NativeErrorFacts => ({ ...none, ...f })

describe("ClaudeCode ErrorTable", () => {
  const cases: ReadonlyArray<readonly [Partial<NativeErrorFacts>, string | undefined]> = [
    // observed on 2.1.332 (reference harnesses.md §4.2, §10)
    [{ apiErrorStatus: 401, assistantError: "authentication_failed", terminalReason: "api_error" }, "authentication_error"],
    [{ apiErrorStatus: 403, assistantError: "authentication_failed", terminalReason: "api_error" }, "authentication_error"],
    [{ apiErrorStatus: 429, apiErrorType: "rate_limit_error", assistantError: "rate_limit", terminalReason: "api_error" }, "rate_limit_exceeded"],
    [{ apiErrorStatus: 500, apiErrorType: "api_error", assistantError: "server_error", terminalReason: "api_error" }, "server_error"],
    [{ apiErrorStatus: 503, assistantError: "server_error", terminalReason: "api_error" }, "server_error"],
    [{ apiErrorStatus: 529, apiErrorType: "overloaded_error", assistantError: "server_error", terminalReason: "api_error" }, "server_overloaded"],
    [{ apiErrorStatus: 400, assistantError: "unknown", terminalReason: "api_error" }, "invalid_request"],
    [{ apiErrorStatus: 404, assistantError: "model_not_found", terminalReason: "api_error" }, "resource_not_found"],
    [{ apiErrorStatus: 413, assistantError: "invalid_request", terminalReason: "image_error" }, "invalid_request"],
    [{ apiErrorStatus: 400, assistantError: "invalid_request", terminalReason: "prompt_too_long" }, "context_length_exceeded"],
    [{ assistantError: "server_error", terminalReason: "api_error" }, "connection_failed"],
    // categories from the SDK types
    [{ assistantError: "billing_error" }, "usage_limit_exceeded"],
    [{ assistantError: "oauth_org_not_allowed" }, "authentication_error"],
    [{ assistantError: "rate_limit" }, "rate_limit_exceeded"],
    // unclassified
    [{ assistantError: "max_output_tokens" }, undefined],
    [{ terminalReason: "max_turns" }, undefined],
    [{}, undefined]
  ]
  for (const [input, code] of cases) {
    it(`classifies ${JSON.stringify(input)} as ${code ?? "unclassified"}`, () => {
      assert.strictEqual(classify(facts(input)), code)
    })
  }

  it("has a row for every code it can produce, each reachable", () => {
    for (const row of errorTable) {
      assert.isTrue(cases.some(([input, code]) => code === row.code && row.test(facts(input))), row.when)
    }
  })

  it("builds the error text from structured facts only, keeps http_status off, and bounds it", () => {
    assert.deepStrictEqual(
      errorPayload(facts({ apiErrorStatus: 529, apiErrorType: "overloaded_error", terminalReason: "api_error" }), "success"),
      {
        error: "Claude Code turn failed (result success, terminal_reason api_error, api_error_status 529, api_error_type overloaded_error)",
        code: "server_overloaded"
      }
    )
    assert.deepStrictEqual(errorPayload(facts({ assistantError: "server_error" }), undefined), {
      error: "Claude Code turn failed (error server_error)",
      code: "connection_failed"
    })
    assert.isAtMost(errorPayload(facts({ apiErrorType: "x".repeat(2000) }), undefined).error.length, 512)
  })
})
