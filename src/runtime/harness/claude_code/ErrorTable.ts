/**
 * Claude Code engine errors → the accepted wire codes (protocol "Native failure classification"; reference
 * harnesses.md §4.2 and §10, observed on 2.1.332). Classification reads only structured fields of the terminal
 * `result` (`terminal_reason`, `api_error_status`, `api_error_type`) and the `error` category of the Turn's
 * last `assistant` frame; it never reads prose. The first matching row wins; no match leaves the error
 * unclassified. `http_status` is kept only with `connection_failed`, and only the table decides it (a
 * `server_error` category with no HTTP status is a connection failure, which has no status to keep).
 * docs/harness-claude-code.md reproduces this table; test/harness/claudeCodeErrorTable.test.ts checks each row.
 */
import type { EngineFailureCode } from "../../../proto/ErrorCodes.js"
import type { ErrorPayload } from "../../../proto/RunEvents.js"

export interface NativeErrorFacts {
  readonly terminalReason: string | undefined
  readonly apiErrorStatus: number | undefined
  readonly apiErrorType: string | undefined
  /** `assistant.error` of the Turn's last assistant frame (a category such as `rate_limit`). */
  readonly assistantError: string | undefined
}

export interface ErrorRow {
  readonly when: string
  readonly test: (facts: NativeErrorFacts) => boolean
  readonly code: EngineFailureCode
}

const status = (...codes: ReadonlyArray<number>) => (f: NativeErrorFacts) =>
  f.apiErrorStatus !== undefined && codes.includes(f.apiErrorStatus)
const type = (...types: ReadonlyArray<string>) => (f: NativeErrorFacts) =>
  f.apiErrorType !== undefined && types.includes(f.apiErrorType)
const category = (...categories: ReadonlyArray<string>) => (f: NativeErrorFacts) =>
  f.assistantError !== undefined && categories.includes(f.assistantError)
const reason = (...reasons: ReadonlyArray<string>) => (f: NativeErrorFacts) =>
  f.terminalReason !== undefined && reasons.includes(f.terminalReason)

/** The table, in precedence order. */
export const errorTable: ReadonlyArray<ErrorRow> = [
  { when: "terminal_reason prompt_too_long", test: reason("prompt_too_long"), code: "context_length_exceeded" },
  { when: "api_error_type overloaded_error or api_error_status 529", test: (f) => type("overloaded_error")(f) || status(529)(f), code: "server_overloaded" },
  { when: "api_error_type rate_limit_error or api_error_status 429", test: (f) => type("rate_limit_error")(f) || status(429)(f), code: "rate_limit_exceeded" },
  { when: "api_error_status 401 or 403, or api_error_type authentication_error / permission_error", test: (f) => status(401, 403)(f) || type("authentication_error", "permission_error")(f), code: "authentication_error" },
  { when: "api_error_status 404 or api_error_type not_found_error", test: (f) => status(404)(f) || type("not_found_error")(f), code: "resource_not_found" },
  { when: "api_error_status 400 or 413, or terminal_reason image_error", test: (f) => status(400, 413)(f) || reason("image_error")(f), code: "invalid_request" },
  { when: "api_error_status 500..599 or api_error_type api_error", test: (f) => (f.apiErrorStatus !== undefined && f.apiErrorStatus >= 500 && f.apiErrorStatus <= 599) || type("api_error")(f), code: "server_error" },
  { when: "assistant.error authentication_failed / oauth_org_not_allowed / account_on_hold / verification_required / cloud_credential_error", test: category("authentication_failed", "oauth_org_not_allowed", "account_on_hold", "verification_required", "cloud_credential_error"), code: "authentication_error" },
  { when: "assistant.error rate_limit", test: category("rate_limit"), code: "rate_limit_exceeded" },
  { when: "assistant.error billing_error", test: category("billing_error"), code: "usage_limit_exceeded" },
  { when: "assistant.error model_not_found", test: category("model_not_found"), code: "resource_not_found" },
  { when: "assistant.error invalid_request", test: category("invalid_request"), code: "invalid_request" },
  { when: "assistant.error server_error with no HTTP status (no response: refused, reset, timed out)", test: (f) => category("server_error")(f) && f.apiErrorStatus === undefined, code: "connection_failed" }
]

export const classify = (facts: NativeErrorFacts): EngineFailureCode | undefined =>
  errorTable.find((row) => row.test(facts))?.code

/**
 * The error frame: a message built from the structured facts only (Claude's own text can carry the endpoint
 * address and is never echoed), plus the classified code.
 */
export const errorPayload = (facts: NativeErrorFacts, subtype: string | undefined): ErrorPayload => {
  const parts = [
    subtype === undefined ? undefined : `result ${subtype}`,
    facts.terminalReason === undefined ? undefined : `terminal_reason ${facts.terminalReason}`,
    facts.apiErrorStatus === undefined ? undefined : `api_error_status ${facts.apiErrorStatus}`,
    facts.apiErrorType === undefined ? undefined : `api_error_type ${facts.apiErrorType}`,
    facts.assistantError === undefined ? undefined : `error ${facts.assistantError}`
  ].filter((p): p is string => p !== undefined)
  // Native values are short identifiers; bound them anyway.
  const error = `Claude Code turn failed (${parts.join(", ")})`.slice(0, 512)
  const code = classify(facts)
  return code === undefined ? { error } : { error, code }
}
