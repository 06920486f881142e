/**
 * A small client of the dev Core's operator API (docs/operator-api.md) for the CLI: one request, the status
 * and the decoded JSON body back. The operator token travels only in the `Authorization` header; it is never
 * part of a URL, an error or a log line. Bodies are read up to `MaxReplyBytes` (a larger reply is refused).
 */
import { Effect, type Redacted, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"

export const OperatorPrefix = "/api/v1/operator"

/** Replies larger than this are refused (lists are paged; a Turn with its outcome is far smaller). */
export const MaxReplyBytes = 16 * 1024 * 1024

/**
 * The request did not produce an HTTP answer (connection refused, reset, an unreadable body). For a request
 * that changes something this proves nothing either way: it may or may not have been applied.
 */
export class OperatorUnreachable extends Schema.TaggedError<OperatorUnreachable>()("OperatorUnreachable", {
  url: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `no answer from the operator API at ${this.url} (${this.reason})`
  }
}

export interface OperatorReply {
  readonly status: number
  /** The decoded JSON body (`undefined` when empty). */
  readonly body: unknown
}

export interface OperatorTarget {
  /** Core's base URL, e.g. `http://127.0.0.1:7400`. */
  readonly url: string
  readonly token: Redacted.Redacted<string>
}

/** One operator API request (`path` below `/api/v1/operator`). */
export const call = (
  target: OperatorTarget,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: unknown
): Effect.Effect<OperatorReply, OperatorUnreachable> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const base = target.url.replace(/\/+$/, "")
    let request = HttpClientRequest.make(method)(`${base}${OperatorPrefix}${path}`).pipe(
      HttpClientRequest.bearerToken(target.token),
      HttpClientRequest.setHeader("accept", "application/json")
    )
    if (body !== undefined) request = HttpClientRequest.bodyJsonUnsafe(request, body)
    const response = yield* client.execute(request)
    const text = yield* response.text
    if (text.length > MaxReplyBytes) {
      return yield* new OperatorUnreachable({ url: base, reason: "the reply is too large" })
    }
    const parsed = text.trim() === "" ? undefined : (yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new OperatorUnreachable({ url: base, reason: `HTTP ${response.status} with a body that is not JSON` })
    }))
    return { status: response.status, body: parsed }
  }).pipe(
    Effect.catchTag("HttpClientError", (e) =>
      Effect.fail(new OperatorUnreachable({ url: target.url, reason: e.reason._tag }))),
    Effect.provide(FetchHttpClient.layer)
  )

/** The `{error, detail}` of an operator API error body, as one line. */
export const errorLine = (reply: OperatorReply): string => {
  const body = reply.body as { readonly error?: unknown; readonly detail?: unknown } | undefined
  const error = typeof body?.error === "string" ? body.error : "error"
  const detail = typeof body?.detail === "string" ? `: ${body.detail.slice(0, 300)}` : ""
  return `HTTP ${reply.status} ${error}${detail}`
}
