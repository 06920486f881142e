/**
 * Sessions: Core-owned configuration (agent kind, Environment type, the Agent configuration as JSON) and
 * the two facts later Turns depend on: the device the Session is bound to (set at its first dispatched
 * Turn; a later Turn never selects another device, because the native Session lives there) and the latest
 * native Session id a `done` or cancellation receipt reported.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { fn } from "../TracedFn.js"
import { SqlClient } from "effect/sql"
import type { EnvironmentSpec } from "./SessionConfig.js"
import { StoreFailed, storeFailed, toInt, toStringOrUndefined } from "./StoreErrors.js"

export type EnvironmentType = EnvironmentSpec["type"]

export interface SessionRecord {
  readonly sessionId: string
  readonly agentKind: string
  readonly environmentType: EnvironmentType
  /** The Environment (type `none`, or a `self_hosted` binding on the Session's device). */
  readonly environment: EnvironmentSpec
  /** The validated Agent configuration (OperatorApi `SessionConfiguration`); `agent_options` is secret-bearing. */
  readonly configuration: Record<string, unknown>
  readonly deviceId: string | undefined
  readonly nativeSessionId: string | undefined
  readonly createdAtMs: number
}

export class SessionStore extends Context.Service<SessionStore, {
  /** Creates a Session (`environment` defaults to type none). */
  readonly create: (
    record: Omit<SessionRecord, "createdAtMs" | "nativeSessionId" | "environment"> & { readonly environment?: EnvironmentSpec }
  ) => Effect.Effect<SessionRecord, StoreFailed>
  readonly get: (sessionId: string) => Effect.Effect<Option.Option<SessionRecord>, StoreFailed>
  readonly list: Effect.Effect<ReadonlyArray<SessionRecord>, StoreFailed>
  /** Up to `limit` Sessions after `after`, in (created_at_ms, session_id) order (keyset paging on an index). */
  readonly listPage: (
    after: Option.Option<{ readonly createdAtMs: number; readonly sessionId: string }>,
    limit: number
  ) => Effect.Effect<ReadonlyArray<SessionRecord>, StoreFailed>
  /** Binds the Session to a device unless it is bound already; succeeds with the device it is bound to. */
  readonly bindDevice: (sessionId: string, deviceId: string) => Effect.Effect<string, StoreFailed>
  readonly setNativeSessionId: (sessionId: string, nativeSessionId: string) => Effect.Effect<void, StoreFailed>
}>()("agentwire/core/dev/SessionStore") {}

/** A `sessions` row as its record (also read with a Turn start's checks, TurnStartChecks.ts). */
export const readSession = (row: Record<string, unknown>): SessionRecord => ({
  sessionId: String(row.session_id),
  agentKind: String(row.agent_kind),
  environmentType: String(row.environment_type) === "self_hosted" ? "self_hosted" : "none",
  environment: row.environment_json === null || row.environment_json === undefined
    ? { type: "none" }
    : JSON.parse(String(row.environment_json)) as EnvironmentSpec,
  configuration: JSON.parse(String(row.configuration_json)) as Record<string, unknown>,
  deviceId: toStringOrUndefined(row.device_id),
  nativeSessionId: toStringOrUndefined(row.native_session_id),
  createdAtMs: toInt(row.created_at_ms)
})

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return SessionStore.of({
    create: fn("SessionStore.create")(function* (input) {
      const record: Omit<SessionRecord, "createdAtMs" | "nativeSessionId"> = { ...input, environment: input.environment ?? { type: "none" } }
      const createdAtMs = yield* Clock.currentTimeMillis
      yield* sql`INSERT INTO sessions ${
        sql.insert({
          session_id: record.sessionId,
          agent_kind: record.agentKind,
          environment_type: record.environmentType,
          environment_json: JSON.stringify(record.environment),
          configuration_json: JSON.stringify(record.configuration),
          device_id: record.deviceId ?? null,
          native_session_id: null,
          created_at_ms: createdAtMs
        })
      }`.pipe(storeFailed("create_session"))
      return { ...record, nativeSessionId: undefined, createdAtMs }
    }),
    get: (sessionId) =>
      sql`SELECT * FROM sessions WHERE session_id = ${sessionId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), readSession)),
        storeFailed("get_session")
      ),
    list: sql`SELECT * FROM sessions ORDER BY created_at_ms, session_id`.pipe(
      Effect.map((rows) => rows.map(readSession)),
      storeFailed("list_sessions")
    ),
    listPage: (after, limit) =>
      Option.match(after, {
        onNone: () => sql`SELECT * FROM sessions ORDER BY created_at_ms, session_id LIMIT ${limit}`,
        onSome: (k) =>
          sql`SELECT * FROM sessions
            WHERE created_at_ms > ${k.createdAtMs} OR (created_at_ms = ${k.createdAtMs} AND session_id > ${k.sessionId})
            ORDER BY created_at_ms, session_id LIMIT ${limit}`
      }).pipe(
        Effect.map((rows) => rows.map(readSession)),
        storeFailed("list_sessions")
      ),
    bindDevice: (sessionId, deviceId) =>
      sql.withTransaction(Effect.gen(function* () {
        yield* sql`UPDATE sessions SET device_id = ${deviceId} WHERE session_id = ${sessionId} AND device_id IS NULL`
        const rows = yield* sql`SELECT device_id FROM sessions WHERE session_id = ${sessionId}`
        return String(rows[0]?.device_id ?? deviceId)
      })).pipe(storeFailed("bind_device")),
    setNativeSessionId: (sessionId, nativeSessionId) =>
      sql`UPDATE sessions SET native_session_id = ${nativeSessionId} WHERE session_id = ${sessionId}`.pipe(
        Effect.asVoid,
        storeFailed("set_native_session")
      )
  })
})

export const layer = Layer.effect(SessionStore, make)
