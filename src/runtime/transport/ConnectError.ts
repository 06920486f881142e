/**
 * Why opening a connection to Core did not succeed (protocol "Ownership and connection", steps 2 and 3; the
 * reference's machine-route errors). Two families, and the reconnect loop depends on the split:
 * - `ConnectRejected`: Core definitely refused us with 401, 403 or 426. Permanent: retrying cannot help until an
 *   operator fixes the credential, the device or the deployed versions.
 * - `ConnectFailed`: anything else (network errors, timeouts, other statuses, a malformed bootstrap reply).
 *   Transient: the daemon reconnects with backoff.
 *
 * Neither ever carries the credential, a header, a URL query or peer text: only a status, a finite error code
 * parsed from Core's `{error, detail}` body (the `detail` text is dropped) and a finite reason.
 */
import { Schema } from "effect"
import { HttpErrorCode } from "../../proto/ErrorCodes.js"

/** Where in the connection sequence something happened. */
export const ConnectPhase = Schema.Literals(["bootstrap", "upgrade"])
export type ConnectPhase = typeof ConnectPhase.Type

/** Core refused the credential (401), the device (403) or the wire version (426). Permanent. */
export class ConnectRejected extends Schema.TaggedError<ConnectRejected>()("ConnectRejected", {
  phase: ConnectPhase,
  status: Schema.Literals([401, 403, 426]),
  /** Core's `error` code when its body parsed; absent otherwise. */
  code: Schema.optionalKey(HttpErrorCode),
  /** Core's wire version as bootstrap reported it (only for a 426 during the upgrade, when plausible). */
  core_version: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `Core rejected the ${this.phase} with HTTP ${this.status}${this.code === undefined ? "" : ` (${this.code})`}`
  }
}

/** Finite reasons of a transient connection failure. */
export const ConnectFailedReason = Schema.Literals([
  "network", // the TCP/TLS connection failed or dropped before a response (detail: a system error code)
  "timeout", // bootstrap took longer than its budget, or the WebSocket handshake took longer than 10 s
  "http_status", // Core answered with a status other than 2xx/101 and other than 401/403/426
  "invalid_response", // bootstrap answered 2xx with a body that is not the expected JSON (or over 64 KiB)
  "invalid_ws_url", // bootstrap's ws_url is not an absolute ws:// or wss:// URL without credentials
  "insecure_ws_url", // bootstrap over https returned a ws:// URL: the credential would travel in clear text
  "handshake" // the WebSocket handshake failed after a response (bad upgrade headers, aborted)
])
export type ConnectFailedReason = typeof ConnectFailedReason.Type

/** Connecting failed for a reason that may go away: the daemon retries with backoff. */
export class ConnectFailed extends Schema.TaggedError<ConnectFailed>()("ConnectFailed", {
  phase: ConnectPhase,
  reason: ConnectFailedReason,
  /** The HTTP status when Core answered (`http_status`). */
  status: Schema.optionalKey(Schema.Int),
  /** Core's `error` code when its body parsed. */
  code: Schema.optionalKey(HttpErrorCode),
  /** A system error code such as `ECONNREFUSED` (`network`), never free text. */
  detail: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    const parts = [
      this.status === undefined ? undefined : `HTTP ${this.status}`,
      this.code,
      this.detail
    ].filter((p): p is string => p !== undefined)
    return `${this.phase} failed (${this.reason}${parts.length === 0 ? "" : `: ${parts.join(", ")}`})`
  }
}

/** A system error code safe to report (`ECONNREFUSED`, `ENOTFOUND`…); anything else is dropped. */
export const systemErrorCode = (error: unknown): string | undefined => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined
  return typeof code === "string" && /^E[A-Z0-9_]{1,40}$/.test(code) ? code : undefined
}
