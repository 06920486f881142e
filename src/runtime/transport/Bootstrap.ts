/**
 * Step 2 of connecting (protocol "Ownership and connection"; reference §1.3): `POST {api}/agent-daemon/bootstrap`
 * with the credential as a Bearer header and `{device_id}` as the JSON body. Core validates the credential over
 * plain HTTP, so credential problems get a real status, and answers where and how to connect.
 *
 * Owns: the request, a 10 s budget, reading at most 64 KiB of the reply, and classifying the outcome. Never: the
 * credential in a URL, an error or a log line; peer text in an error (Core's `detail` is parsed and dropped); a
 * comparison of `protocol_version` (the WebSocket upgrade enforces the version with 426).
 */
import { Duration, Effect, Option, Redacted, Result, Schema, Stream } from "effect"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { HttpErrorBody, type HttpErrorCode } from "../../proto/ErrorCodes.js"
import type { DeviceId } from "../../proto/Ids.js"
import { ConnectFailed, type ConnectPhase, ConnectRejected, systemErrorCode } from "./ConnectError.js"
import { bearerAuthorization } from "./internal/credential.js"
import { heartbeatIntervalFrom } from "./Transport.js"

/** Budget of the whole bootstrap request (connect, send, read the reply). */
export const BootstrapTimeout: Duration.Duration = Duration.seconds(10)
/** At most this many bytes of a bootstrap reply (success or error) are read. */
export const MaxBootstrapResponseBytes = 64 * 1024

export interface BootstrapRequest {
  /** The machine API base, e.g. `https://core.example/api/v1` (RuntimeConfig normalises it). */
  readonly apiBase: string
  readonly deviceId: DeviceId
  readonly credential: Redacted.Redacted<string>
  /** Sent as `User-Agent` (e.g. `agentwire/0.1.0`). */
  readonly userAgent: string
  /** This attempt's connection id (Connector.ts), sent as `X-Agentwire-Connection-Id`. */
  readonly connectionId?: string
}

export interface BootstrapResult {
  /** The authenticated device id Core returned (never empty). */
  readonly deviceId: string
  /** The WebSocket URL to dial: ws:// or wss://, without credentials, `token` parameter or fragment. */
  readonly wsUrl: string
  /** Heartbeat cadence: `heartbeat_seconds` clamped to [1 s, 300 s] (logged), or 15 s when absent or <= 0. */
  readonly heartbeatInterval: Duration.Duration
  /** Core's wire version when it returned a plausible one (only used in operator messages). */
  readonly protocolVersion: string | undefined
}

const BootstrapResponse = Schema.Struct({
  device_id: Schema.String,
  ws_url: Schema.String,
  heartbeat_seconds: Schema.optionalKey(Schema.Finite),
  protocol_version: Schema.optionalKey(Schema.String),
  workspace_id: Schema.optionalKey(Schema.String)
})
const decodeResponse = Schema.decodeUnknownResult(BootstrapResponse)
const decodeErrorBody = Schema.decodeUnknownResult(HttpErrorBody)

/** A version string we are willing to repeat in an operator message. */
const plausibleVersion = (v: string | undefined): string | undefined =>
  v !== undefined && /^[0-9A-Za-z.+-]{1,32}$/.test(v) ? v : undefined

/** Parses JSON text, or nothing. */
const parseJson = (bytes: Uint8Array): unknown => {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return undefined
  }
}

/** Core's `error` code from an error body, when the body is the documented `{error, detail}` shape. */
export const errorCodeOf = (body: Uint8Array | undefined): HttpErrorCode | undefined => {
  if (body === undefined) return undefined
  const parsed = decodeErrorBody(parseJson(body))
  return Result.isSuccess(parsed) ? parsed.success.error : undefined
}

/** The permanent / transient split for a refused request. */
export const classifyStatus = (
  phase: ConnectPhase,
  status: number,
  code: HttpErrorCode | undefined
): ConnectRejected | ConnectFailed =>
  status === 401 || status === 403 || status === 426
    ? new ConnectRejected({ phase, status, ...(code === undefined ? {} : { code }) })
    : new ConnectFailed({ phase, reason: "http_status", status, ...(code === undefined ? {} : { code }) })

/**
 * Checks and cleans bootstrap's `ws_url`: an absolute ws:// or wss:// URL without user info; any `token` query
 * parameter and any fragment are removed (a credential never travels in a URL). When the API base is https,
 * a ws:// URL is refused: the Bearer header would travel in clear text.
 */
export const sanitizeWsUrl = (raw: string, apiBase: string): Result.Result<string, ConnectFailed> => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Result.fail(new ConnectFailed({ phase: "bootstrap", reason: "invalid_ws_url" }))
  }
  if ((url.protocol !== "ws:" && url.protocol !== "wss:") || url.username !== "" || url.password !== "") {
    return Result.fail(new ConnectFailed({ phase: "bootstrap", reason: "invalid_ws_url" }))
  }
  if (url.protocol === "ws:" && apiBase.startsWith("https:")) {
    return Result.fail(new ConnectFailed({ phase: "bootstrap", reason: "insecure_ws_url" }))
  }
  url.searchParams.delete("token")
  url.hash = ""
  return Result.succeed(url.toString())
}

const readBounded = (response: HttpClientResponse.HttpClientResponse) =>
  response.stream.pipe(
    Stream.runFoldEffect(
      () => ({ chunks: [] as Array<Uint8Array>, size: 0 }),
      (acc, chunk: Uint8Array) =>
        acc.size + chunk.byteLength > MaxBootstrapResponseBytes
          ? Effect.fail("too_large" as const)
          : Effect.succeed({ chunks: [...acc.chunks, chunk], size: acc.size + chunk.byteLength })
    ),
    Effect.map(({ chunks, size }) => {
      const out = new Uint8Array(size)
      let offset = 0
      for (const c of chunks) {
        out.set(c, offset)
        offset += c.byteLength
      }
      return out
    })
  )

const networkFailure = (error: unknown) => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? (error as { cause: unknown }).cause : error
  const detail = systemErrorCode(cause) ?? systemErrorCode((cause as { cause?: unknown } | undefined)?.cause)
  return new ConnectFailed({ phase: "bootstrap", reason: "network", ...(detail === undefined ? {} : { detail }) })
}

/**
 * Runs bootstrap once. Success proves Core accepted the credential for this device just now and told us where
 * to connect; it proves nothing about the WebSocket upgrade. Fails with `ConnectRejected` on 401/403/426
 * (permanent), `ConnectFailed` otherwise (transient). No resource outlives the call.
 */
export const bootstrap = Effect.fn("Bootstrap.run")(function* (request: BootstrapRequest) {
  const client = yield* HttpClient.HttpClient
  const httpRequest = HttpClientRequest.post(`${request.apiBase}/agent-daemon/bootstrap`).pipe(
    HttpClientRequest.setHeader("Authorization", bearerAuthorization(request.credential)),
    HttpClientRequest.setHeader("User-Agent", request.userAgent),
    request.connectionId === undefined ? (r) => r : HttpClientRequest.setHeader("X-Agentwire-Connection-Id", request.connectionId),
    HttpClientRequest.acceptJson,
    HttpClientRequest.bodyText(JSON.stringify({ device_id: request.deviceId }), "application/json")
  )
  return yield* Effect.scoped(
    Effect.gen(function* () {
      const response = yield* client.execute(httpRequest).pipe(Effect.mapError(networkFailure))
      const body = yield* readBounded(response).pipe(
        Effect.map(Option.some),
        Effect.catch((e) =>
          e === "too_large" ? Effect.succeed(Option.none<Uint8Array>()) : Effect.fail(networkFailure(e))
        )
      )
      if (response.status < 200 || response.status > 299) {
        return yield* classifyStatus("bootstrap", response.status, errorCodeOf(Option.getOrUndefined(body)))
      }
      if (Option.isNone(body)) return yield* new ConnectFailed({ phase: "bootstrap", reason: "invalid_response" })
      const decoded = decodeResponse(parseJson(body.value))
      if (Result.isFailure(decoded) || decoded.success.device_id === "") {
        return yield* new ConnectFailed({ phase: "bootstrap", reason: "invalid_response" })
      }
      const reply = decoded.success
      const wsUrl = sanitizeWsUrl(reply.ws_url, request.apiBase)
      if (Result.isFailure(wsUrl)) return yield* wsUrl.failure
      const heartbeatInterval = heartbeatIntervalFrom(reply.heartbeat_seconds)
      const offered = reply.heartbeat_seconds
      if (offered !== undefined && offered > 0 && Duration.toSeconds(heartbeatInterval) !== offered) {
        yield* Effect.logWarning("bootstrap heartbeat_seconds out of range; clamped").pipe(
          Effect.annotateLogs({ heartbeat_seconds: offered, used_seconds: Duration.toSeconds(heartbeatInterval) })
        )
      }
      return {
        deviceId: reply.device_id,
        wsUrl: wsUrl.success,
        heartbeatInterval,
        protocolVersion: plausibleVersion(reply.protocol_version)
      } satisfies BootstrapResult
    })
  ).pipe(
    Effect.timeoutOrElse({
      duration: BootstrapTimeout,
      orElse: () => Effect.fail(new ConnectFailed({ phase: "bootstrap", reason: "timeout" }))
    })
  )
})
