/**
 * Engine error classification for Codex (reference harnesses.md §4.1): the terminal turn's structured
 * `codexErrorInfo` maps to a wire `code` (and `http_status` only with `connection_failed`). Never by prose:
 * the message text is carried (bounded) but never read. An unknown or malformed value leaves the error
 * unclassified.
 *
 * Decisions where the reference left a choice (docs/harness-codex.md): 401/403 inside `httpConnectionFailed`
 * are structured statuses, so they map to `authentication_error`; 404 stays `connection_failed` + status.
 */
import type { ErrorPayload } from "../../../proto/RunEvents.js"
import { bounded } from "./CodexRpc.js"

type Code = NonNullable<ErrorPayload["code"]>

const plain: Readonly<Record<string, Code>> = {
  contextWindowExceeded: "context_length_exceeded",
  usageLimitExceeded: "usage_limit_exceeded",
  rateLimitExceeded: "rate_limit_exceeded",
  serverOverloaded: "server_overloaded",
  internalServerError: "server_error",
  unauthorized: "authentication_error",
  badRequest: "invalid_request",
  modelNotFound: "resource_not_found",
  cyberPolicy: "cyber_policy"
}

const withStatus = new Set([
  "httpConnectionFailed",
  "responseStreamConnectionFailed",
  "responseStreamDisconnected",
  "responseTooManyFailedAttempts"
])

/** The wire classification of a `codexErrorInfo` value; `undefined` leaves the error unclassified. */
export const classify = (info: unknown): Pick<ErrorPayload, "code" | "http_status"> => {
  if (typeof info === "string") {
    const code = plain[info]
    return code === undefined ? {} : { code }
  }
  if (typeof info !== "object" || info === null || Array.isArray(info)) return {}
  const keys = Object.keys(info)
  if (keys.length !== 1 || !withStatus.has(keys[0]!)) return {}
  const variant = keys[0]!
  const inner = (info as Record<string, unknown>)[variant]
  const raw = typeof inner === "object" && inner !== null ? (inner as Record<string, unknown>)["httpStatusCode"] : undefined
  const status = typeof raw === "number" && Number.isInteger(raw) && raw >= 100 && raw <= 599 ? raw : undefined
  if (variant === "responseTooManyFailedAttempts" && status === 429) return { code: "rate_limit_exceeded" }
  if (variant === "httpConnectionFailed" && (status === 401 || status === 403)) return { code: "authentication_error" }
  return status === undefined ? { code: "connection_failed" } : { code: "connection_failed", http_status: status }
}

/** The `error` Run event of a failed turn: the bounded native message plus the structured classification. */
export const turnErrorPayload = (error: { readonly message: string; readonly codexErrorInfo?: unknown }): ErrorPayload => ({
  error: bounded(error.message, 1000),
  ...classify(error.codexErrorInfo)
})
