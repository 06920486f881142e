/**
 * The dev Core's suspension attempts (reference §8.1; docs/operator-api.md "Suspension"): an operator quiesces
 * a device's bound Environment and later resumes it. Each attempt is one row of `suspension_attempts`, keyed by
 * its `suspend_id` (a fresh UUID), written before anything is sent and updated with what the reply proved:
 *
 * ```
 * quiescing ──► suspended | quiesce_rejected | quiesce_unknown
 * suspended / quiesce_unknown / resume_unknown / resume_rejected ──► resuming ──► resumed | resume_rejected | resume_unknown
 * ```
 *
 * Never replayed: at start-up (`recover`) a `quiescing` row becomes `quiesce_unknown` and a `resuming` row
 * `resume_unknown`; only an operator's new request sends anything. A resume after an uncertain quiesce carries
 * `rollback: true` (a no-op resume of the still-running source). A new quiesce is refused while the device's
 * latest attempt is unsettled (anything but `resumed` or `quiesce_rejected`).
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Ids } from "../../proto/index.js"
import { Gateway } from "../Gateway.js"
import * as SuspensionDriver from "../SuspensionDriver.js"
import { DevIds } from "./DevIds.js"
import { OperatorConflict, OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"
import { type StoreFailed, storeFailed, toInt, toStringOrUndefined } from "./StoreErrors.js"

export type SuspensionState =
  | "quiescing"
  | "suspended"
  | "quiesce_rejected"
  | "quiesce_unknown"
  | "resuming"
  | "resumed"
  | "resume_rejected"
  | "resume_unknown"

/** States from which a resume may be sent. */
const resumable: ReadonlyArray<SuspensionState> = ["suspended", "quiesce_unknown", "resume_unknown", "resume_rejected"]
/** States that leave no suspension in progress: a new quiesce may start. */
const settled: ReadonlyArray<SuspensionState> = ["resumed", "quiesce_rejected"]

/** One attempt as the operator API shows it (in the device view and as the answer of quiesce / resume). */
export interface SuspensionView {
  readonly suspend_id: string
  readonly environment_id: string
  readonly state: SuspensionState
  /** The Runtime's refusal category (`*_rejected`) or why the outcome is unknown (`*_unknown`). */
  readonly reason: string | null
  readonly created_at_ms: number
  readonly updated_at_ms: number
}

const read = (row: Record<string, unknown>): SuspensionView & { readonly device_id: string } => ({
  device_id: String(row.device_id),
  suspend_id: String(row.suspend_id),
  environment_id: String(row.environment_id),
  state: String(row.state) as SuspensionState,
  reason: toStringOrUndefined(row.reason) ?? null,
  created_at_ms: toInt(row.created_at_ms),
  updated_at_ms: toInt(row.updated_at_ms)
})

const isDeviceId = Schema.is(Ids.DeviceId)

const view = ({ device_id: _d, ...v }: SuspensionView & { readonly device_id: string }): SuspensionView => v

export class Suspensions extends Context.Service<Suspensions, {
  /** The device's latest attempt, if any. */
  readonly latest: (deviceId: string) => Effect.Effect<Option.Option<SuspensionView>, StoreFailed>
  /** The latest attempt of each of these devices that has one, in one statement (a listing page's devices). */
  readonly latestOf: (deviceIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, SuspensionView>, StoreFailed>
  /** Quiesces the device's Environment on its live connection; the answer says what the reply proved. */
  readonly quiesce: (
    deviceId: string,
    environmentId: string
  ) => Effect.Effect<SuspensionView, OperatorRequestInvalid | OperatorConflict | OperatorUnavailable>
  /** Resumes the device's latest attempt on its live connection (with `rollback` after an uncertain quiesce). */
  readonly resume: (
    deviceId: string,
    options: { readonly rollback?: boolean }
  ) => Effect.Effect<SuspensionView, OperatorConflict | OperatorUnavailable>
  /** Start-up reconciliation: requests a previous process left in flight become unknown. */
  readonly recover: Effect.Effect<number, StoreFailed>
}>()("agentwire/core/dev/Suspensions") {}

const unavailable = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, () => new OperatorUnavailable({ operation: "suspension_store" }))

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const gateway = yield* Gateway
  const ids = yield* DevIds

  const latestRow = (deviceId: string) =>
    sql`SELECT * FROM suspension_attempts WHERE device_id = ${deviceId} ORDER BY created_at_ms DESC, suspend_id DESC LIMIT 1`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), read)),
      storeFailed("latest_suspension")
    )

  const mark = (suspendId: string, state: SuspensionState, reason: string | null) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      sql`UPDATE suspension_attempts SET state = ${state}, reason = ${reason}, updated_at_ms = ${now}
        WHERE suspend_id = ${suspendId}`.pipe(Effect.asVoid, storeFailed("mark_suspension")))

  const getRow = (suspendId: string) =>
    sql`SELECT * FROM suspension_attempts WHERE suspend_id = ${suspendId}`.pipe(
      Effect.map((rows) => read(rows[0]!)),
      storeFailed("get_suspension")
    )

  const liveSession = (deviceId: string) =>
    Effect.gen(function* () {
      const session = isDeviceId(deviceId) ? yield* gateway.session(deviceId) : Option.none()
      if (Option.isNone(session)) return yield* new OperatorConflict({ reason: "device_offline", detail: "the device has no live connection" })
      return session.value
    })

  /** Runs the driver and records what its outcome proves (`ok` on success, else rejected / unknown). */
  const settle = (
    suspendId: string,
    operation: "quiesce" | "resume",
    run: Effect.Effect<void, SuspensionDriver.SuspensionError>
  ) =>
    Effect.gen(function* () {
      const outcome = yield* Effect.result(run)
      const [state, reason]: readonly [SuspensionState, string | null] = outcome._tag === "Success"
        ? [operation === "quiesce" ? "suspended" : "resumed", null]
        : outcome.failure._tag === "SuspensionRejected"
        ? [`${operation}_rejected`, outcome.failure.code]
        : outcome.failure._tag === "SuspensionUnknown"
        ? [`${operation}_unknown`, outcome.failure.reason]
        // Refused before sending: nothing reached the Runtime.
        : operation === "quiesce"
        ? ["quiesce_rejected", `not_sent_${outcome.failure.reason}`]
        : ["resume_unknown", `not_sent_${outcome.failure.reason}`]
      yield* unavailable(mark(suspendId, state, reason))
      yield* Effect.logInfo("suspension request settled").pipe(
        Effect.annotateLogs({ suspend_id: suspendId, operation, state, ...(reason === null ? {} : { reason }) })
      )
      return view(yield* unavailable(getRow(suspendId)))
    })

  const quiesce = Effect.fn("Suspensions.quiesce")(function* (deviceId: string, environmentId: string) {
    if (environmentId.trim() === "" || Buffer.byteLength(environmentId, "utf8") > 128) {
      return yield* new OperatorRequestInvalid({ detail: "environment_id must be non-blank and at most 128 bytes" })
    }
    const latest = yield* unavailable(latestRow(deviceId))
    if (Option.isSome(latest) && !settled.includes(latest.value.state)) {
      return yield* new OperatorConflict({
        reason: "suspension_unsettled",
        detail: `the device's suspension ${latest.value.suspend_id} is ${latest.value.state}; resume it first`
      })
    }
    const session = yield* liveSession(deviceId)
    const suspendId = yield* ids.next("suspension")
    const now = yield* Clock.currentTimeMillis
    // Persisted before the send: a restart in between leaves `quiescing`, recovered as unknown (never replayed).
    yield* unavailable(sql`INSERT INTO suspension_attempts ${
      sql.insert({
        suspend_id: suspendId,
        device_id: deviceId,
        environment_id: environmentId,
        state: "quiescing",
        reason: null,
        created_at_ms: now,
        updated_at_ms: now
      })
    }`.pipe(storeFailed("insert_suspension")))
    return yield* settle(suspendId, "quiesce", SuspensionDriver.request(session, {
      operation: "quiesce",
      requestId: Ids.unsafeMake.operationId(yield* ids.next("operation")),
      environmentId,
      suspendId
    }))
  })

  const resume = Effect.fn("Suspensions.resume")(function* (deviceId: string, options: { readonly rollback?: boolean }) {
    const latest = yield* unavailable(latestRow(deviceId))
    if (Option.isNone(latest) || !resumable.includes(latest.value.state)) {
      return yield* new OperatorConflict({
        reason: "not_suspended",
        detail: Option.isNone(latest) ? "the device has no suspension" : `the device's latest suspension is ${latest.value.state}`
      })
    }
    const attempt = latest.value
    const session = yield* liveSession(deviceId)
    yield* unavailable(mark(attempt.suspend_id, "resuming", null))
    const rollback = options.rollback === true || attempt.state === "quiesce_unknown"
    return yield* settle(attempt.suspend_id, "resume", SuspensionDriver.request(session, {
      operation: "resume",
      requestId: Ids.unsafeMake.operationId(yield* ids.next("operation")),
      environmentId: attempt.environment_id,
      suspendId: attempt.suspend_id,
      ...(rollback ? { rollback: true } : {})
    }))
  })

  return Suspensions.of({
    latest: (deviceId) => Effect.map(latestRow(deviceId), Option.map(view)),
    latestOf: (deviceIds) =>
      deviceIds.length === 0
        ? Effect.succeed(new Map())
        : sql`SELECT * FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY device_id ORDER BY created_at_ms DESC, suspend_id DESC) AS nth
            FROM suspension_attempts WHERE ${sql.in("device_id", deviceIds)}
          ) AS ranked WHERE nth = 1`.pipe(
          Effect.map((rows) => {
            const out = new Map<string, SuspensionView>()
            for (const row of rows) {
              const latest = read(row)
              out.set(latest.device_id, view(latest))
            }
            return out
          }),
          storeFailed("latest_suspension")
        ),
    quiesce,
    resume,
    recover: sql.withTransaction(Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const before = yield* sql`SELECT COUNT(*) AS n FROM suspension_attempts WHERE state IN ('quiescing', 'resuming')`
      yield* sql`UPDATE suspension_attempts SET state = 'quiesce_unknown', reason = 'core_restarted', updated_at_ms = ${now} WHERE state = 'quiescing'`
      yield* sql`UPDATE suspension_attempts SET state = 'resume_unknown', reason = 'core_restarted', updated_at_ms = ${now} WHERE state = 'resuming'`
      return toInt(before[0]?.n ?? 0)
    })).pipe(storeFailed("recover_suspensions"))
  })
})

export const layer: Layer.Layer<Suspensions, never, SqlClient.SqlClient | Gateway | DevIds> = Layer.effect(Suspensions, make)
