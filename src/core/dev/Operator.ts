/**
 * The dev Core's operator operations on devices, credentials and Sessions (Turn operations are in
 * `Turns.ts`). The operator HTTP API (`OperatorApi.ts`) and the demo call these; both see the same
 * typed errors (`OperatorErrors.ts`).
 *
 * Credentials are printed once: `createCredential` returns the credential `Redacted`, the store keeps only
 * its digest, and nothing else holds it. Revoking closes the device's live connection with close code 4001
 * ("runtime retired"), which a daemon treats as permanent; its next connection attempt is refused with
 * `bad_credential`.
 */
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { fn } from "../TracedFn.js"
import { Ids, Limits } from "../../proto/index.js"
import { SqlClient } from "effect/sql"
import { Gateway } from "../Gateway.js"
import { DevIds } from "./DevIds.js"
import { DeviceDirectory, type DeviceView } from "./DeviceDirectory.js"
import { DeviceStore } from "./DeviceStore.js"
import { OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"
import * as Listings from "./Listings.js"
import {
  configurationIssue,
  type CreateSessionRequest,
  type EnvironmentSpec,
  publicConfiguration,
  type SessionConfiguration,
  withoutSecrets
} from "./SessionConfig.js"
import { McpSecrets, type McpSecretUnavailable } from "./McpSecrets.js"
import { type SessionRecord, SessionStore } from "./SessionStore.js"
import { StoreFailed } from "./StoreErrors.js"
import { Suspensions, type SuspensionView } from "./Suspensions.js"
import { SessionInitialization } from "./Initialization.js"
import { initializationIssue, type InitializationView } from "./InitializationSpec.js"

/** A device as the operator API lists it: the directory's view plus its latest suspension attempt. */
export type OperatorDeviceView = DeviceView & { readonly suspension: SuspensionView | null }

export interface SessionView {
  readonly session_id: string
  readonly agent_kind: string
  readonly environment: EnvironmentSpec
  readonly configuration: Record<string, unknown>
  readonly device_id: string | null
  readonly native_session_id: string | null
  readonly created_at_ms: number
  /** The Session's environment initialization and its progress (null when it has none). */
  readonly initialization?: InitializationView | null
}

export const sessionView = (session: SessionRecord): SessionView => ({
  session_id: session.sessionId,
  agent_kind: session.agentKind,
  environment: session.environment,
  configuration: publicConfiguration(session.configuration as SessionConfiguration),
  device_id: session.deviceId ?? null,
  native_session_id: session.nativeSessionId ?? null,
  created_at_ms: session.createdAtMs
})

/** A bearer secret that cannot be kept or read: logged with its reason (never the secret), answered 503. */
export const secretUnavailable = (e: McpSecretUnavailable) =>
  Effect.andThen(
    Effect.logError(e.message).pipe(Effect.annotateLogs({ reason: e.reason })),
    Effect.fail(new OperatorUnavailable({ operation: `mcp_secret_${e.reason}` }))
  )

/** Maps a store failure to the operator error (nothing was decided). */
export const unavailable = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, StoreFailed> | OperatorUnavailable, R> =>
  Effect.mapError(effect, (e) =>
    e instanceof StoreFailed ? new OperatorUnavailable({ operation: e.operation }) : (e as Exclude<E, StoreFailed>))

const isDeviceId = Schema.is(Ids.DeviceId)

export class Operator extends Context.Service<Operator, {
  /**
   * Creates the device when missing and issues a fresh credential (an earlier one stops authenticating).
   * The credential is returned once; only its digest is stored.
   */
  readonly createCredential: (
    deviceId: string
  ) => Effect.Effect<{ readonly deviceId: string; readonly credential: Redacted.Redacted<string> }, OperatorRequestInvalid | OperatorUnavailable>
  /** Revokes the device's credentials and closes its live connection (4001). */
  readonly revokeCredential: (
    deviceId: string
  ) => Effect.Effect<{ readonly disconnected: boolean }, OperatorNotFound | OperatorUnavailable>
  readonly listDevices: Effect.Effect<ReadonlyArray<OperatorDeviceView>, OperatorUnavailable>
  readonly getDevice: (deviceId: string) => Effect.Effect<OperatorDeviceView, OperatorNotFound | OperatorUnavailable>
  readonly createSession: (request: CreateSessionRequest) => Effect.Effect<SessionView, OperatorRequestInvalid | OperatorNotFound | OperatorUnavailable>
  readonly getSession: (sessionId: string) => Effect.Effect<SessionView, OperatorNotFound | OperatorUnavailable>
  readonly listSessions: Effect.Effect<ReadonlyArray<SessionView>, OperatorUnavailable>
  /** One page of devices, oldest first (Listings.ts). */
  readonly listDevicesPage: (query: Listings.PageQuery) => Effect.Effect<Listings.Page<OperatorDeviceView>, OperatorUnavailable>
  /** One page of Sessions, oldest first (Listings.ts). */
  readonly listSessionsPage: (query: Listings.PageQuery) => Effect.Effect<Listings.Page<SessionView>, OperatorUnavailable>
}>()("agentwire/core/dev/Operator") {}

const make = Effect.gen(function* () {
  const devices = yield* DeviceStore
  const directory = yield* DeviceDirectory
  const sessions = yield* SessionStore
  const gateway = yield* Gateway
  const ids = yield* DevIds
  const suspensions = yield* Suspensions
  const initialization = yield* Effect.serviceOption(SessionInitialization)
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  const secrets = yield* Effect.serviceOption(McpSecrets)
  /** The view with the Session's initialization (when the service is present). */
  const fullView = (session: SessionRecord) =>
    Option.isNone(initialization)
      ? Effect.succeed(sessionView(session))
      : Effect.map(initialization.value.view(session.sessionId), (init) => ({ ...sessionView(session), initialization: Option.getOrNull(init) }))
  const withSuspension = (device: DeviceView) =>
    Effect.map(suspensions.latest(device.device_id), (latest): OperatorDeviceView => ({ ...device, suspension: Option.getOrNull(latest) }))

  const createCredential = fn("Operator.createCredential")(function* (deviceId: string) {
    if (!isDeviceId(deviceId)) {
      return yield* new OperatorRequestInvalid({ detail: `device_id must be non-blank and at most ${Limits.MaxCorrelationIdBytes} bytes` })
    }
    const credential = yield* unavailable(devices.issueCredential(deviceId))
    yield* Effect.logInfo("device credential issued").pipe(Effect.annotateLogs({ device_id: Ids.printable(deviceId) }))
    return { deviceId, credential }
  })

  const revokeCredential = fn("Operator.revokeCredential")(function* (deviceId: string) {
    const known = yield* unavailable(devices.revoke(deviceId))
    if (!known) return yield* new OperatorNotFound({ resource: "device", id: deviceId })
    const session = isDeviceId(deviceId) ? yield* gateway.session(deviceId) : Option.none()
    if (Option.isSome(session)) yield* session.value.close(Limits.CloseRuntimeRetired, "disconnected")
    yield* Effect.logInfo("device credential revoked").pipe(
      Effect.annotateLogs({ device_id: Ids.printable(deviceId), disconnected: Option.isSome(session) })
    )
    return { disconnected: Option.isSome(session) }
  })

  const getDevice = fn("Operator.getDevice")(function* (deviceId: string) {
    const view = yield* unavailable(directory.get(deviceId))
    if (Option.isNone(view)) return yield* new OperatorNotFound({ resource: "device", id: deviceId })
    return yield* unavailable(withSuspension(view.value))
  })

  const createSession = fn("Operator.createSession")(function* (request: CreateSessionRequest) {
    const environment = request.environment ?? { type: "none" as const }
    const issue = configurationIssue(request.configuration ?? {}, environment)
    if (Option.isSome(issue)) return yield* new OperatorRequestInvalid({ detail: `configuration: ${issue.value}` })
    // Bearer secrets are encrypted at rest (McpSecrets.ts); the stored configuration keeps `bearer_set` only.
    const { stored: configuration, secrets: bearers } = withoutSecrets(request.configuration ?? {})
    if (bearers.length > 0 && Option.isNone(secrets)) {
      return yield* new OperatorRequestInvalid({ detail: "MCP bearer secrets are not supported by this Core" })
    }
    if (environment.type === "self_hosted" && request.device_id === undefined) {
      return yield* new OperatorRequestInvalid({ detail: "a self_hosted Environment needs device_id (the device it is bound on)" })
    }
    if (request.device_id !== undefined) {
      const device = yield* unavailable(devices.get(request.device_id))
      if (Option.isNone(device)) return yield* new OperatorNotFound({ resource: "device", id: request.device_id })
    }
    const sessionId = yield* ids.next("session")
    if (request.initialization !== undefined) {
      if (environment.type !== "self_hosted") {
        return yield* new OperatorRequestInvalid({ detail: "initialization needs a self_hosted Environment (it runs in its workspace)" })
      }
      if (Option.isNone(initialization)) return yield* new OperatorRequestInvalid({ detail: "initialization is not supported by this Core" })
      const initIssue = initializationIssue(request.initialization, {
        environmentId: environment.id,
        sessionId,
        networkAccess: environment.network_access
      })
      if (Option.isSome(initIssue)) return yield* new OperatorRequestInvalid({ detail: `initialization: ${initIssue.value}` })
    }
    const createBoth = Effect.gen(function* () {
      const created = yield* sessions.create({
        sessionId,
        agentKind: request.agent_kind,
        environmentType: environment.type,
        environment,
        configuration,
        deviceId: request.device_id
      })
      if (bearers.length > 0 && Option.isSome(secrets)) yield* secrets.value.store(sessionId, bearers)
      if (request.initialization !== undefined && Option.isSome(initialization)) {
        yield* initialization.value.create(
          sessionId,
          request.initialization,
          environment.type === "self_hosted" ? environment.network_access : undefined
        )
      }
      return created
    })
    // One transaction: a Session never exists without its initialization or its bearer secrets.
    const session = yield* unavailable(
      Option.isNone(sql) || (request.initialization === undefined && bearers.length === 0)
        ? createBoth
        : sql.value.withTransaction(createBoth).pipe(
          Effect.catchTag("SqlError", () => Effect.fail(new StoreFailed({ operation: "create_session" })))
        )
    ).pipe(Effect.catchTag("McpSecretUnavailable", secretUnavailable))
    yield* Effect.logInfo("session created").pipe(Effect.annotateLogs({
      session_id: sessionId,
      mcp_servers: configuration.mcp_http_servers?.length ?? 0,
      mcp_bearers: bearers.length
    }))
    return yield* unavailable(fullView(session))
  })

  const getSession = fn("Operator.getSession")(function* (sessionId: string) {
    const session = yield* unavailable(sessions.get(sessionId))
    if (Option.isNone(session)) return yield* new OperatorNotFound({ resource: "session", id: sessionId })
    return yield* unavailable(fullView(session.value))
  })

  return Operator.of({
    createCredential,
    revokeCredential,
    listDevices: unavailable(Effect.flatMap(directory.list, Effect.forEach(withSuspension))),
    getDevice,
    createSession,
    getSession,
    listSessions: Effect.map(unavailable(sessions.list), (all) => all.map(sessionView)),
    listDevicesPage: (query) =>
      unavailable(Effect.flatMap(
        Listings.readPage(
          query,
          (after, limit) => directory.listPage(Option.map(after, (k) => ({ createdAtMs: k.createdAtMs, deviceId: k.id })), limit),
          (d) => ({ createdAtMs: d.created_at_ms, id: d.device_id })
        ),
        // One suspension read for the page, not one per device.
        (page) =>
          Effect.map(suspensions.latestOf(page.items.map((d) => d.device_id)), (latest) => ({
            ...page,
            items: page.items.map((d): OperatorDeviceView => ({ ...d, suspension: latest.get(d.device_id) ?? null }))
          }))
      )),
    listSessionsPage: (query) =>
      Effect.map(
        unavailable(Listings.readPage(
          query,
          (after, limit) => sessions.listPage(Option.map(after, (k) => ({ createdAtMs: k.createdAtMs, sessionId: k.id })), limit),
          (s) => ({ createdAtMs: s.createdAtMs, id: s.sessionId })
        )),
        (page) => ({ items: page.items.map(sessionView), nextCursor: page.nextCursor })
      )
  })
})

export const layer = Layer.effect(Operator, make)
