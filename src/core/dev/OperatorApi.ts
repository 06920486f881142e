/**
 * The operator HTTP + JSON API with Server-Sent Events (docs/operator-api.md documents every route with
 * examples). Every route requires `Authorization: Bearer <operator token>`; nothing else authenticates here,
 * and the operator token authenticates nowhere else (the machine routes accept daemon credentials only).
 *
 * Status rule: 4xx means nothing was sent to a Runtime (a malformed request, an unknown resource, a state
 * conflict, an admission refusal); 200 after a dispatch carries a body that says what is proven (an input
 * `accepted` / `rejected` / `unknown`, a cancellation `cancelled` / `unconfirmed`, …), never an error status.
 * Error bodies are `{error, detail}`; details never echo a credential, a payload or unbounded peer text.
 */
import { type Duration, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import { Sse } from "effect/encoding"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { Ids, Limits, MessageInput } from "../../proto/index.js"
import { markAuthenticated } from "../server/GatewayHttp.js"
import type { AdmissionRejection, ConfigurationRejected } from "../Outcome.js"
import { Operator } from "./Operator.js"
import type { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"
import { OperatorRequestInvalid as RequestInvalid } from "./OperatorErrors.js"
import { queryParam, readBody } from "./OperatorBody.js"
import { type AnsweredMethod, AnsweredMethods, methodNotAllowed, probes } from "./OperatorProbes.js"
import { dropLaggingClient, makeKeepAlive, writeBeside, writeEvents } from "./OperatorSse.js"
import * as OperatorToken from "./OperatorToken.js"
import { MaxCreateSessionBodyBytes } from "./InitializationSpec.js"
import { CreateSessionRequest } from "./SessionConfig.js"
import * as Listings from "./Listings.js"
import * as TurnList from "./TurnList.js"
import { TurnStore } from "./TurnStore.js"
import { Turns } from "./Turns.js"

export { MaxOperatorBodyBytes, queryParam, readBody } from "./OperatorBody.js"

/** Every operator route lives under this prefix. */
export const OperatorPrefix = "/api/v1/operator"

/** Path parameters up to this many characters reach the routes (the router's default bound is 100). */
export const MaxPathParamChars = 16 * 1024

export type OperatorError =
  | OperatorRequestInvalid
  | OperatorNotFound
  | OperatorConflict
  | OperatorUnavailable
  | AdmissionRejection
  | ConfigurationRejected

const json = (status: number, body: unknown) => HttpServerResponse.jsonUnsafe(body, { status })
const errorBody = (status: number, error: string, detail: string) => json(status, { error, detail })

/** The HTTP answer of each operator error. */
export const errorResponse = (error: OperatorError): HttpServerResponse.HttpServerResponse => {
  switch (error._tag) {
    case "OperatorRequestInvalid":
      return errorBody(400, "invalid_request", error.detail)
    case "OperatorNotFound":
      return errorBody(404, "not_found", `${error.resource} not found`)
    case "OperatorConflict":
      return errorBody(409, error.reason, error.detail)
    case "OperatorUnavailable":
      return errorBody(500, "internal", error.operation)
    case "CapabilitiesUndeclared":
      return errorBody(422, "capabilities_undeclared", error.message)
    case "HarnessUnavailable":
      return errorBody(422, "harness_unavailable", error.message)
    case "BindingInvalid":
      return errorBody(422, "binding_invalid", error.message)
    case "CapabilityUnsupported":
      return json(422, { error: "capability_unsupported", detail: error.message, capability: error.capability, source: error.source })
    case "ConfigurationRejected":
      return errorBody(422, "configuration_rejected", error.message)
  }
}

const param = (name: string) =>
  Effect.map(HttpRouter.params, (params) => params[name] ?? "")

const isDeviceId = Schema.is(Ids.DeviceId)

/** The `:device_id` path parameter of every device route: valid per the protocol, or a 400 that never echoes it. */
export const deviceIdParam: Effect.Effect<Ids.DeviceId, OperatorRequestInvalid, HttpRouter.RouteContext> = Effect.flatMap(
  param("device_id"),
  (id) =>
    isDeviceId(id)
      ? Effect.succeed(id)
      : Effect.fail(new RequestInvalid({ detail: `device_id must be non-blank and at most ${Limits.MaxCorrelationIdBytes} bytes` }))
)

/** The last event of a stream whose journal could not be read. */
const internalErrorEvent = Sse.encoder.write({ _tag: "Event", id: undefined, event: "error", data: "{\"error\":\"internal\"}" })

const SteerBody = Schema.Struct({ input: MessageInput.MessageInput, input_id: Schema.optionalKey(Schema.String) })
const StartTurnBody = Schema.Struct({ input: MessageInput.MessageInput })
const PermissionBody = Schema.Struct({
  approved: Schema.Boolean,
  message: Schema.optionalKey(Schema.String),
  updated_input: Schema.optionalKey(Schema.Record(Schema.String, Schema.Json))
})
const UserChoiceBody = Schema.Struct({
  question_answers: Schema.optionalKey(
    Schema.Array(Schema.Struct({ question_id: Schema.String, answers: Schema.Array(Schema.String) }))
  ),
  cancelled: Schema.optionalKey(Schema.Boolean),
  reason: Schema.optionalKey(Schema.String)
})
const FunctionResultBody = Schema.Struct({
  /** Text, or ordered content parts. */
  output: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(MessageInput.InputContent)])),
  /** Set when the function failed: appended as a text part and `success` is false. */
  error: Schema.optionalKey(Schema.String)
})

export interface OperatorApiOptions {
  /** The SSE keep-alive interval (default 15 s). */
  readonly keepAlive?: Duration.Input
}

/**
 * The info line of a refused operator request: method, path (at most 200 characters, no query) and whether a
 * bearer token was presented at all. Never the token, never a header value.
 */
export const logUnauthorized = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.logWarning("operator request unauthorized (401)").pipe(
    Effect.annotateLogs({
      method: request.method,
      path: new URL(request.url, "http://operator.invalid").pathname.slice(0, 200),
      bearer: (request.headers["authorization"] ?? "").startsWith("Bearer ") ? "wrong" : "missing"
    })
  )

/**
 * The operator routes, registered on the current `HttpRouter`. `token` is the operator token; it is compared
 * in constant time and never logged.
 */
export const layer = (
  token: Redacted.Redacted<string>,
  options: OperatorApiOptions = {}
): Layer.Layer<never, never, HttpRouter.HttpRouter | Operator | Turns | TurnStore | SqlClient.SqlClient> =>
  HttpRouter.use((router_) =>
    Effect.gen(function* () {
      const operator = yield* Operator
      const turns = yield* Turns
      const sql = yield* SqlClient.SqlClient
      const turnStore = yield* TurnStore
      // One keep-alive ticker for every event stream of this API (OperatorSse.makeKeepAlive), in the layer's scope.
      const keepAlive = yield* makeKeepAlive(options.keepAlive)
      yield* probes(router_, sql)

      // Every operator route is registered through `router`, which remembers the methods of each path so
      // the other methods answer 405 (after authorization, like every operator route).
      const methods = new Map<string, Array<string>>()
      const router = {
        add: <E, R>(
          method: AnsweredMethod,
          path: HttpRouter.PathInput,
          handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
        ) => {
          methods.set(path, [...(methods.get(path) ?? []), method])
          return router_.add(method, path, handler)
        }
      }

      const tokenMatches = OperatorToken.matcher(token)
      const authorized = (request: HttpServerRequest.HttpServerRequest): boolean => {
        const header = request.headers["authorization"]
        if (header === undefined || !header.startsWith("Bearer ")) return false
        return tokenMatches(header.slice("Bearer ".length).trim())
      }

      const recover = (error: OperatorError) => Effect.succeed(errorResponse(error))
      /** Wraps a handler: authorization first, then the typed errors as JSON answers. */
      const route = <R>(
        handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, OperatorError, R>
      ) =>
      (request: HttpServerRequest.HttpServerRequest) => {
        // Called by the router once per request, so the checks run here, without an Effect around them.
        if (!authorized(request)) {
          return Effect.as(logUnauthorized(request), errorBody(401, "unauthorized", "Authorization: Bearer <operator token> required"))
        }
        // An authorized operator connection is never evicted for unauthenticated ones (connectionGuard.ts).
        markAuthenticated(request)
        return Effect.catch(handler(request), recover)
      }

      const p = (path: string) => `${OperatorPrefix}${path}` as HttpRouter.PathInput

      // ------------------------------------------------------------------------------------ devices
      // Listings are paged (Listings.ts): `limit` (default 50, at most 200) and the previous page's `next_cursor`.
      const pageQuery = (request: HttpServerRequest.HttpServerRequest) =>
        Listings.parsePageQuery(new URL(request.url, "http://operator.invalid").searchParams)
      yield* router.add("GET", p("/devices"), route((request) =>
        Effect.flatMap(pageQuery(request), (query) =>
          Effect.map(operator.listDevicesPage(query), (page) => json(200, { devices: page.items, next_cursor: page.nextCursor })))))
      yield* router.add(
        "GET",
        p("/devices/:device_id"),
        route(() => Effect.flatMap(deviceIdParam, (id) => Effect.map(operator.getDevice(id), (device) => json(200, device))))
      )
      yield* router.add(
        "POST",
        p("/devices/:device_id/credential"),
        route(() =>
          Effect.flatMap(deviceIdParam, (id) =>
            Effect.map(operator.createCredential(id), (issued) =>
              // The one place the credential leaves the process: this response body, once.
              json(201, { device_id: issued.deviceId, credential: Redacted.value(issued.credential) })))
        )
      )
      yield* router.add(
        "DELETE",
        p("/devices/:device_id/credential"),
        route(() =>
          Effect.flatMap(deviceIdParam, (id) =>
            Effect.map(operator.revokeCredential(id), (r) => json(200, { device_id: id, revoked: true, disconnected: r.disconnected })))
        )
      )

      // ------------------------------------------------------------------------------------ sessions
      yield* router.add(
        "POST",
        p("/sessions"),
        route((request) =>
          Effect.flatMap(readBody(request, CreateSessionRequest, MaxCreateSessionBodyBytes), (body) =>
            Effect.map(operator.createSession(body), (session) => json(201, session))))
      )
      yield* router.add("GET", p("/sessions"), route((request) =>
        Effect.flatMap(pageQuery(request), (query) =>
          Effect.map(operator.listSessionsPage(query), (page) => json(200, { sessions: page.items, next_cursor: page.nextCursor })))))
      yield* router.add(
        "GET",
        p("/sessions/:session_id"),
        route(() =>
          Effect.flatMap(param("session_id"), (id) =>
            Effect.gen(function* () {
              const session = yield* operator.getSession(id)
              // The latest page of Turns only (issue 18: a read costs the same however many Turns the Session
              // has), oldest first as before; `turns_next_cursor` continues with older ones at GET /turns.
              const page = yield* TurnList.listPage({
                limit: TurnList.DefaultPageSize,
                cursor: Option.none(),
                status: Option.none(),
                sessionId: Option.some(id),
                deviceId: Option.none()
              }).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.provideService(TurnStore, turnStore))
              return json(200, { ...session, turns: [...page.turns].reverse(), turns_next_cursor: page.next_cursor })
            })))
      )

      // ------------------------------------------------------------------------------------ turns
      yield* router.add(
        "POST",
        p("/sessions/:session_id/turns"),
        route((request) =>
          Effect.flatMap(param("session_id"), (id) =>
            Effect.flatMap(readBody(request, StartTurnBody), (body) =>
              Effect.map(turns.start(id, body.input), (turn) => json(202, turn)))))
      )
      yield* router.add(
        "GET",
        p("/turns"),
        route((request) =>
          Effect.flatMap(TurnList.parseQuery(new URL(request.url, "http://operator.invalid").searchParams), (query) =>
            TurnList.listPage(query).pipe(
              Effect.provideService(SqlClient.SqlClient, sql),
              Effect.provideService(TurnStore, turnStore),
              Effect.map((page) => json(200, page))
            )))
      )
      yield* router.add(
        "GET",
        p("/turns/:turn_id"),
        route(() => Effect.flatMap(param("turn_id"), (id) => Effect.map(turns.get(id), (turn) => json(200, turn))))
      )
      yield* router.add(
        "GET",
        p("/turns/:turn_id/outcome"),
        route(() => Effect.flatMap(param("turn_id"), (id) => Effect.map(turns.get(id), (turn) => json(200, turn.outcome))))
      )
      yield* router.add(
        "GET",
        p("/turns/:turn_id/events"),
        route(Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
          const id = yield* param("turn_id")
          const lastEventId = request.headers["last-event-id"] ?? queryParam(request.url, "after") ?? "0"
          const after = Number.parseInt(lastEventId, 10)
          // 404 before the stream starts.
          const followed = yield* turns.followChecked(id, Number.isFinite(after) && after > 0 ? after : 0, dropLaggingClient(request, id))
          // Written straight to the response (OperatorSse.writeEvents, issue 18); the body stream carries nothing.
          const body = keepAlive.around(writeEvents(followed, request, internalErrorEvent), writeBeside(request))
          return HttpServerResponse.stream(Stream.fromEffectDrain(body), {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }))
      )
      yield* router.add(
        "POST",
        p("/turns/:turn_id/steer"),
        route(Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
          const id = yield* param("turn_id")
          const body = yield* readBody(request, SteerBody)
          return json(200, yield* turns.steer(id, body.input, body.input_id))
        }))
      )
      yield* router.add(
        "POST",
        p("/turns/:turn_id/cancel"),
        route(() => Effect.flatMap(param("turn_id"), (id) => Effect.map(turns.cancel(id), (r) => json(200, r))))
      )
      yield* router.add(
        "POST",
        p("/turns/:turn_id/permissions/:request_id"),
        route(Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
          const id = yield* param("turn_id")
          const interaction = yield* param("request_id")
          const body = yield* readBody(request, PermissionBody)
          return json(200, yield* turns.answerPermission(id, interaction, body))
        }))
      )
      yield* router.add(
        "POST",
        p("/turns/:turn_id/questions/:ask_id"),
        route(Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
          const id = yield* param("turn_id")
          const interaction = yield* param("ask_id")
          const body = yield* readBody(request, UserChoiceBody)
          return json(200, yield* turns.answerUserChoice(id, interaction, body))
        }))
      )
      yield* router.add(
        "POST",
        p("/turns/:turn_id/functions/:call_id"),
        route(Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
          const id = yield* param("turn_id")
          const call = yield* param("call_id")
          const body = yield* readBody(request, FunctionResultBody)
          return json(200, yield* turns.functionResult(id, call, body))
        }))
      )

      for (const [path, allowed] of methods) {
        for (const method of AnsweredMethods.filter((m) => !allowed.includes(m))) {
          yield* router_.add(method, path as HttpRouter.PathInput, route(() => Effect.succeed(methodNotAllowed(allowed))))
        }
      }
    })
  )

