/**
 * The machine routes of Core's gateway (reference §1.3–§1.6; protocol "Ownership and connection"):
 *
 * - `POST /api/v1/agent-daemon/bootstrap` → `{device_id, workspace_id, ws_url, heartbeat_seconds,
 *   protocol_version}`; `ws_url` comes from `GatewayConfig.publicUrl`, never from request headers.
 * - `GET /api/v1/agent-daemon/ws?device_id=…&version=…` with the Bearer header: 400 `missing_params`, then 426
 *   `incompatible_version` (exact match, checked before any credential check or dispatch), then 401/403/500
 *   from `DeviceCredentials`, then the upgrade; the connection then runs in `Gateway.accept` until it ends.
 * - `GET /api/v1/agent-daemon/device-status?device_id=…` with the Bearer header → `{device_id, online, owner}`
 *   (`owner`: the device's owner lease when several nodes share a database — `DeviceOwner`, provided by the
 *   dev Core's lease keeper — else null).
 *
 * Unauthenticated callers learn nothing about which devices exist: an unknown device and a wrong credential are
 * both answered 401 `bad_credential` (Core's log keeps the difference). Bootstrap checks the whole credential
 * (its form: `awdc_` prefix, at most 256 characters; then `DeviceCredentials.identify`: an active credential
 * of an agent-daemon device) before it reads a body, and the body must arrive within 10 s (then the body's
 * `device_id` must be that credential's device);
 * the server's header, request and pending-connection bounds are in `internal/connectionGuard.ts`.
 *
 * Every error is JSON `{error, detail}`. Only daemon credentials authenticate (Project API keys and the Core
 * key are unknown to `DeviceCredentials`). The credential is wrapped in `Redacted` the moment it is read from
 * the header and never appears in a URL, a log line, a span or an error detail; peer text echoed in a detail
 * (the daemon's version) is bounded and reduced to printable ASCII.
 */
import { ByteSize, type Cause, Duration, Effect, Exit, Layer, Option, Redacted, Result, Schema, Scope } from "effect"
import { Socket } from "effect/socket"
import { HttpIncomingMessage, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { type ErrorCodes, Ids, Limits, Version } from "../../proto/index.js"
import {
  CredentialPrefix,
  CredentialRejected,
  type CredentialStoreFailed,
  DeviceCredentials,
  type DeviceRecord
} from "../DeviceCredentials.js"
import { Gateway } from "../Gateway.js"
import { OwnerClaim, type OwnerView } from "../OwnerClaim.js"
import { BootstrapPath, DeviceStatusPath, GatewayConfig, type GatewayConfigShape, WebSocketPath } from "../GatewayConfig.js"
import type { DeviceTransport } from "../transport/DeviceTransport.js"
import { markAuthenticated, releaseUpgradeListeners } from "../transport/internal/connectionGuard.js"
import { fromSocket } from "../transport/internal/socket.js"
import { dropReaderListeners, fromWebSocket, TrackedWebSocket, upgradedWebSocket } from "../transport/internal/webSocket.js"

/** The HTTP server factory with Core's connection bounds (header, request and pending-connection limits). */
export { type ConnectionLimits, createGuardedServer, defaultConnectionLimits, markAuthenticated } from "../transport/internal/connectionGuard.js"

/**
 * Options for the `ws` WebSocket server behind the routes: the 4 MiB inbound frame bound, and the socket class
 * that lets the ws route use each upgraded `ws` socket directly (transport/internal/webSocket.ts).
 */
export const websocketServerOptions = { maxPayload: Limits.MaxFrameBytes, WebSocket: TrackedWebSocket } as const

/** Bootstrap request bodies larger than this are refused as `bad_json`. */
export const MaxBootstrapBodyBytes = 64 * 1024
/** A bootstrap body must arrive within this budget once its credential was checked. */
export const BootstrapBodyTimeout: Duration.Duration = Duration.seconds(10)
/** A presented credential longer than this cannot be a daemon credential. */
export const MaxCredentialChars = 256

/** The form every daemon credential has; checked before any body is read or any store is asked. */
export const isWellFormedCredential = (credential: Redacted.Redacted<string>): boolean => {
  const value = Redacted.value(credential)
  return value.startsWith(CredentialPrefix) && value.length <= MaxCredentialChars
}

/** The bootstrap response. */
export interface BootstrapResponse {
  readonly device_id: string
  readonly workspace_id: string
  readonly ws_url: string
  readonly heartbeat_seconds: number
  readonly protocol_version: string
}

/** The device-status response. */
export interface DeviceStatusResponse {
  readonly device_id: string
  readonly online: boolean
  /** The device's owner lease (several nodes on one database); null on a single node. */
  readonly owner: OwnerView | null
}

// ---------------------------------------------------------------------------------------------- helpers

/** An error answer `{error, detail}`. */
export const errorResponse = (status: number, error: ErrorCodes.HttpErrorCode, detail: string) =>
  HttpServerResponse.jsonUnsafe({ error, detail } satisfies ErrorCodes.HttpErrorBody, { status })

/** At most 64 printable ASCII characters of peer text; anything else becomes "?". */
export const boundedEcho = (text: string, max = 64): string => {
  const clipped = text.length > max ? text.slice(0, max) : text
  const printable = clipped.replace(/[^\x20-\x7e]/g, "?")
  return text.length > max ? `${printable}...` : printable
}

/**
 * The credential of an `Authorization: Bearer <credential>` header (the prefix is case-sensitive with one
 * space; surrounding whitespace of the token is trimmed), or none.
 */
export const bearerOf = (request: HttpServerRequest.HttpServerRequest): Option.Option<Redacted.Redacted<string>> => {
  const header = request.headers["authorization"]
  if (header === undefined || !header.startsWith("Bearer ")) return Option.none()
  const token = header.slice("Bearer ".length).trim()
  return token === "" ? Option.none() : Option.some(Redacted.make(token))
}

const queryOf = (request: HttpServerRequest.HttpServerRequest): URLSearchParams => {
  const index = request.url.indexOf("?")
  return new URLSearchParams(index < 0 ? "" : request.url.slice(index + 1))
}

/** A device id that cannot name a device (blank or over 128 bytes) is answered as unknown without a lookup. */
const isDeviceId = Schema.is(Ids.DeviceId)

const authenticate = (
  credentials: DeviceCredentials["Service"],
  deviceId: string,
  credential: Redacted.Redacted<string>
): Effect.Effect<DeviceRecord, HttpServerResponse.HttpServerResponse> =>
  (isDeviceId(deviceId)
    ? credentials.authenticate(deviceId, credential)
    : Effect.fail(new CredentialRejected({ code: "unknown_device" }))).pipe(
      Effect.catchCause((cause) => {
        for (const reason of cause.reasons) {
          if (reason._tag === "Fail" && reason.error._tag === "CredentialRejected") {
            return logRejection(reason.error.code, deviceId).pipe(Effect.andThen(Effect.fail(rejectedResponse(reason.error.code))))
          }
        }
        // Only the failure's kind is logged: never the cause's text, which a store could fill with input.
        return Effect.logError("credential check failed").pipe(
          Effect.annotateLogs({ failure: describeStoreFailure(cause) }),
          Effect.andThen(Effect.fail(errorResponse(500, "internal", "credential check failed")))
        )
      })
    )

/**
 * An unknown device and a wrong credential get the same answer (401 `bad_credential`), so an unauthenticated
 * caller cannot tell which device ids exist; `wrong_runtime_type` is only reached with a valid credential.
 */
const rejectedResponse = (code: CredentialRejected["code"]) =>
  code === "wrong_runtime_type"
    ? errorResponse(403, code, "the device is not an agent-daemon runtime")
    : errorResponse(401, "bad_credential", "credential rejected")

/** Core's log keeps what the wire hides: the real reason and a bounded, printable device id. */
const logRejection = (code: CredentialRejected["code"] | "malformed_credential", deviceId: string) =>
  Effect.logInfo("device credential rejected").pipe(Effect.annotateLogs({ reason: code, device_id: Ids.printable(deviceId) }))

/** The credential alone (no device id yet): the same answers as `authenticate`. */
const checkCredential = (
  credentials: DeviceCredentials["Service"],
  credential: Redacted.Redacted<string>
): Effect.Effect<DeviceRecord, HttpServerResponse.HttpServerResponse> =>
  credentials.identify(credential).pipe(
    Effect.catchCause((cause) => {
      for (const reason of cause.reasons) {
        if (reason._tag === "Fail" && reason.error._tag === "CredentialRejected") {
          return logRejection(reason.error.code, "").pipe(Effect.andThen(Effect.fail(rejectedResponse(reason.error.code))))
        }
      }
      return Effect.logError("credential check failed").pipe(
        Effect.annotateLogs({ failure: describeStoreFailure(cause) }),
        Effect.andThen(Effect.fail(errorResponse(500, "internal", "credential check failed")))
      )
    })
  )

const describeStoreFailure = (cause: Cause.Cause<CredentialRejected | CredentialStoreFailed>): string => {
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail" && reason.error._tag === "CredentialStoreFailed") return `store failed (${reason.error.operation})`
    if (reason._tag === "Interrupt") return "interrupted"
  }
  return "defect"
}

const parseJson = (text: string): Result.Result<unknown, void> => {
  try {
    return Result.succeed(JSON.parse(text) as unknown)
  } catch {
    return Result.fail(undefined)
  }
}

const respondOrError = <R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, HttpServerResponse.HttpServerResponse, R>) =>
  Effect.catch(effect, (response) => Effect.succeed(response))

// ---------------------------------------------------------------------------------------------- handlers

interface Deps {
  readonly gateway: Gateway["Service"]
  readonly credentials: DeviceCredentials["Service"]
  readonly config: GatewayConfigShape
  /** Several nodes on one database: the owner lease is claimed before the 101 (OwnerClaim.ts). */
  readonly ownerClaim: Option.Option<OwnerClaim["Service"]>
}

const bootstrap = (deps: Deps) => (request: HttpServerRequest.HttpServerRequest) =>
  withConnectionId(request)(respondOrError(Effect.gen(function*() {
    if (request.method !== "POST") return yield* Effect.fail(errorResponse(405, "method_not_allowed", ""))
    const bearer = bearerOf(request)
    if (Option.isNone(bearer)) return yield* Effect.fail(errorResponse(401, "missing_bearer", "Authorization: Bearer required"))
    // The whole credential is checked before any body is read (its form, then the store: the device it
    // belongs to): a caller without a valid one cannot hold the socket open with a trickling body.
    if (!isWellFormedCredential(bearer.value)) {
      return yield* logRejection("malformed_credential", "").pipe(
        Effect.andThen(Effect.fail(errorResponse(401, "bad_credential", "credential rejected")))
      )
    }
    yield* checkCredential(deps.credentials, bearer.value)
    const text = yield* request.text.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MaxBootstrapBodyBytes)),
      Effect.mapError(() => errorResponse(400, "bad_json", "the body could not be read (at most 64 KiB)")),
      Effect.timeoutOrElse({
        duration: BootstrapBodyTimeout,
        orElse: () => Effect.fail(errorResponse(400, "bad_json", "the body did not arrive within 10 s"))
      })
    )
    const parsed = parseJson(text)
    if (Result.isFailure(parsed)) return yield* Effect.fail(errorResponse(400, "bad_json", "the body is not JSON"))
    const body = parsed.success
    let deviceId: unknown = undefined
    if (body !== null) {
      if (typeof body !== "object" || Array.isArray(body)) {
        return yield* Effect.fail(errorResponse(400, "bad_json", "the body is not a JSON object"))
      }
      deviceId = (body as Record<string, unknown>)["device_id"]
      if (deviceId !== undefined && deviceId !== null && typeof deviceId !== "string") {
        return yield* Effect.fail(errorResponse(400, "bad_json", "device_id must be a string"))
      }
    }
    if (typeof deviceId !== "string" || deviceId === "") {
      return yield* Effect.fail(errorResponse(400, "missing_device_id", "device_id is required"))
    }
    const device = yield* authenticate(deps.credentials, deviceId, bearer.value)
    return HttpServerResponse.jsonUnsafe({
      device_id: device.deviceId,
      workspace_id: device.workspaceId,
      ws_url: deps.config.wsUrl,
      heartbeat_seconds: deps.config.heartbeatSeconds,
      protocol_version: Version.ProtocolVersion
    } satisfies BootstrapResponse)
  })))

const deviceStatus = (deps: Deps) => (request: HttpServerRequest.HttpServerRequest) =>
  respondOrError(Effect.gen(function*() {
    if (request.method !== "GET") return yield* Effect.fail(errorResponse(405, "method_not_allowed", ""))
    const bearer = bearerOf(request)
    if (Option.isNone(bearer)) return yield* Effect.fail(errorResponse(401, "missing_bearer", "Authorization: Bearer required"))
    const deviceId = queryOf(request).get("device_id") ?? ""
    if (deviceId === "") return yield* Effect.fail(errorResponse(400, "missing_device_id", "device_id is required"))
    const device = yield* authenticate(deps.credentials, deviceId, bearer.value)
    const session = yield* deps.gateway.session(device.deviceId as Ids.DeviceId)
    return HttpServerResponse.jsonUnsafe({
      device_id: device.deviceId,
      online: Option.isSome(session),
      owner: Option.isSome(deps.ownerClaim) ? yield* deps.ownerClaim.value.ownerOf(device.deviceId) : null
    } satisfies DeviceStatusResponse)
  }))

/**
 * The daemon's id of this connection attempt (`X-Agentwire-Connection-Id` on bootstrap and the upgrade; docs/
 * wire-decisions.md E-log): logged as `connection_id` beside Core's `connection` number so both sides' lines
 * match. Only a short token of `[A-Za-z0-9_-]` is used; anything else is ignored, never echoed.
 */
export const ConnectionIdHeader = "x-agentwire-connection-id"
const connectionIdOf = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const value = request.headers[ConnectionIdHeader]
  return value !== undefined && /^[A-Za-z0-9_-]{1,64}$/.test(value) ? value : undefined
}
const withConnectionId = (request: HttpServerRequest.HttpServerRequest) => {
  const id = connectionIdOf(request)
  return <A, E, R>(effect: Effect.Effect<A, E, R>) => id === undefined ? effect : Effect.annotateLogs(effect, { connection_id: id })
}

const websocket = (deps: Deps) => (request: HttpServerRequest.HttpServerRequest) =>
  withConnectionId(request)(respondOrError(Effect.gen(function*() {
    if (request.method !== "GET") return yield* Effect.fail(errorResponse(405, "method_not_allowed", ""))
    const query = queryOf(request)
    const deviceId = query.get("device_id") ?? ""
    const version = query.get("version") ?? ""
    const bearer = bearerOf(request)
    if (deviceId === "" || version === "" || Option.isNone(bearer)) {
      return yield* Effect.fail(errorResponse(400, "missing_params", "device_id, version and a Bearer credential are required"))
    }
    // The version is checked before any credential check or dispatch (reference §1.5).
    if (!Version.isCompatible(version)) {
      return yield* Effect.fail(
        errorResponse(
          426,
          "incompatible_version",
          `daemon protocol ${boundedEcho(version)} incompatible with server ${Version.ProtocolVersion}`
        )
      )
    }
    const device = yield* authenticate(deps.credentials, deviceId, bearer.value)
    // An authenticated daemon connection leaves the pending set: it is never evicted for unauthenticated ones.
    markAuthenticated(request)
    if ((request.headers["upgrade"] ?? "").toLowerCase() !== "websocket") {
      return yield* Effect.fail(errorResponse(400, "missing_params", "a WebSocket upgrade is required"))
    }
    if (Option.isSome(deps.ownerClaim)) {
      yield* deps.ownerClaim.value.beforeUpgrade(device.deviceId).pipe(
        Effect.tapError(() => Effect.logError("owner lease not claimed; upgrade refused").pipe(
          Effect.annotateLogs({ device_id: Ids.printable(device.deviceId) })
        )),
        Effect.mapError(() => errorResponse(500, "internal", "the owner lease could not be claimed"))
      )
    }
    const socket = yield* request.upgrade.pipe(
      Effect.mapError(() => errorResponse(500, "internal", "the upgrade failed"))
    )
    // Over the `ws` socket (`detached`) the connection is opened and this handler returns at once: no fiber,
    // scope or context is kept per idle connection (issue 18). The upgrade's scope is then left unclosed for the
    // garbage collector: its finalizers would remove effect/socket's listeners (gone already, see
    // `directTransport`) and close the `ws` socket, which the transport does itself at the connection's end.
    // Over effect/socket's wrapper the handler runs the connection to its end and closes the scope, as before.
    const scope = yield* Scope.make()
    yield* directTransport(socket, request, deps.config).pipe(
      Scope.provide(scope),
      Effect.flatMap(({ detached, transport }) =>
        detached
          ? deps.gateway.open(device, transport)
          : deps.gateway.accept(device, transport).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
      ),
      Effect.catch((error) =>
        Effect.andThen(
          Scope.close(scope, Exit.void),
          Effect.logInfo("websocket closed before the handshake completed").pipe(
            Effect.annotateLogs({ device_id: Ids.printable(device.deviceId), reason: error.reason._tag })
          )
        )
      )
    )
    return HttpServerResponse.empty()
  })))

/**
 * The connection's transport: the upgraded `ws` socket itself when the server made it a `TrackedWebSocket`
 * (`websocketServerOptions`; no fiber per connection, no copy per frame: `detached`), else `effect/socket`'s
 * wrapper. Acquiring the socket's reader completes the handshake (the 101); over the `ws` socket the reader's
 * listeners are then removed at once, in the same step, so every frame is read by the transport alone and
 * nothing keeps the reader (and the context it captured) alive.
 */
const directTransport = (
  socket: Socket.Socket,
  request: HttpServerRequest.HttpServerRequest,
  config: GatewayConfigShape
): Effect.Effect<{ readonly transport: DeviceTransport; readonly detached: boolean }, Socket.SocketError, Scope.Scope> =>
  Effect.gen(function*() {
    const source = request.source as { readonly socket?: unknown } | null | undefined
    const reader = yield* socket.reader
    const ws = upgradedWebSocket(typeof source === "object" && source !== null ? source.socket : undefined)
    if (ws === undefined) {
      const transport = yield* fromSocket(Socket.make({ reader: Effect.succeed(reader), writer: socket.writer }), {
        capacity: config.sendQueueCapacity,
        writeDeadline: config.writeDeadline
      })
      return { transport, detached: false }
    }
    const transport = fromWebSocket(ws, { capacity: config.sendQueueCapacity })
    dropReaderListeners(ws)
    releaseUpgradeListeners(request)
    return { transport, detached: true }
  })

// ---------------------------------------------------------------------------------------------- layer

/**
 * Adds the three machine routes to the current `HttpRouter`. The gateway, the credential service and the
 * configuration are captured when the layer is built, so the routes need nothing from the server's
 * context: mount this beside other routes (the dev Core's operator API) and provide `Gateway` outside
 * `HttpRouter.serve` so other layers share it. Give the WebSocket server `websocketServerOptions`.
 */
export const layer: Layer.Layer<never, never, HttpRouter.HttpRouter | Gateway | DeviceCredentials | GatewayConfig> =
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const deps: Deps = {
        gateway: yield* Gateway,
        credentials: yield* DeviceCredentials,
        config: yield* GatewayConfig,
        ownerClaim: yield* Effect.serviceOption(OwnerClaim)
      }
      yield* router.add("*", BootstrapPath, bootstrap(deps))
      yield* router.add("*", DeviceStatusPath, deviceStatus(deps))
      yield* router.add("*", WebSocketPath, websocket(deps))
    })
  )
