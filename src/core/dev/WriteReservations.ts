/**
 * Durable write reservations of the Files API (protocol "Workspace operations": Core durably reserves a write
 * under the Session lock before any Runtime work and blocks successor mutations across restarts until exact
 * settlement; the request is never replayed). One row per durable mutation id (`operation_id`, the
 * `workspace_write` envelope id):
 *
 * ```
 * reserved ──► dispatched ──► committing ──► completed | rejected | unknown
 *    │             │ (no commit sent)
 *    └─────────────┴──► failed (definite: the installer never ran) / rejected
 * ```
 *
 * `committing` is written before the commit frame is sent: only from there on may the file have changed.
 * At start-up (`recover`), `reserved` and `dispatched` rows settle as `failed` (the previous process never
 * sent their commit) and `committing` rows become `unknown`. An `unknown` row is never settled automatically:
 * it keeps later writes of its Session refused with `write_unsettled`.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { StoreFailed, storeFailed, toInt, toIntOrUndefined, toStringOrUndefined } from "./StoreErrors.js"

export type ReservationStatus = "reserved" | "dispatched" | "committing" | "completed" | "rejected" | "failed" | "unknown"

/** Statuses that settle nothing: a later write of the Session must not start. */
export const unsettledStatuses: ReadonlyArray<ReservationStatus> = ["reserved", "dispatched", "committing", "unknown"]

export interface Reservation {
  readonly reservationId: string
  readonly sessionId: string
  readonly operationId: string
  readonly status: ReservationStatus
  readonly sha256: string | undefined
  readonly sizeBytes: number | undefined
  readonly createdAtMs: number
  readonly settledAtMs: number | undefined
}

export class WriteReservations extends Context.Service<WriteReservations, {
  /** The Session's unsettled reservation, if any (call under the Session lock). */
  readonly unsettled: (sessionId: string) => Effect.Effect<Option.Option<Reservation>, StoreFailed>
  /** Records a new reservation (`reserved`); `reservationId` doubles as the durable mutation id. */
  readonly reserve: (record: {
    readonly reservationId: string
    readonly sessionId: string
    readonly sha256: string
    readonly sizeBytes: number
  }) => Effect.Effect<Reservation, StoreFailed>
  /** Moves a reservation forward (`dispatched`, `committing`, or a settlement). */
  readonly mark: (reservationId: string, status: ReservationStatus) => Effect.Effect<void, StoreFailed>
  readonly get: (reservationId: string) => Effect.Effect<Option.Option<Reservation>, StoreFailed>
  /** Start-up reconciliation (see the header); returns how many rows changed. */
  readonly recover: Effect.Effect<number, StoreFailed>
}>()("agentwire/core/dev/WriteReservations") {}

const read = (row: Record<string, unknown>): Reservation => ({
  reservationId: String(row.reservation_id),
  sessionId: String(row.session_id),
  operationId: String(row.operation_id),
  status: String(row.status) as ReservationStatus,
  sha256: toStringOrUndefined(row.digest),
  sizeBytes: toIntOrUndefined(row.size_bytes),
  createdAtMs: toInt(row.created_at_ms),
  settledAtMs: toIntOrUndefined(row.settled_at_ms)
})

const isSettlement = (status: ReservationStatus) => status === "completed" || status === "rejected" || status === "failed"

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return WriteReservations.of({
    unsettled: (sessionId) =>
      sql`SELECT * FROM write_reservations WHERE session_id = ${sessionId}
        AND status IN ('reserved', 'dispatched', 'committing', 'unknown') ORDER BY created_at_ms LIMIT 1`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), read)),
        storeFailed("unsettled_write")
      ),
    reserve: Effect.fn("WriteReservations.reserve")(function* (record) {
      const createdAtMs = yield* Clock.currentTimeMillis
      yield* sql`INSERT INTO write_reservations ${
        sql.insert({
          reservation_id: record.reservationId,
          session_id: record.sessionId,
          operation_id: record.reservationId,
          status: "reserved",
          digest: record.sha256,
          size_bytes: record.sizeBytes,
          created_at_ms: createdAtMs,
          settled_at_ms: null
        })
      }`.pipe(storeFailed("reserve_write"))
      return {
        reservationId: record.reservationId,
        sessionId: record.sessionId,
        operationId: record.reservationId,
        status: "reserved" as const,
        sha256: record.sha256,
        sizeBytes: record.sizeBytes,
        createdAtMs,
        settledAtMs: undefined
      }
    }),
    mark: (reservationId, status) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE write_reservations SET status = ${status}, settled_at_ms = ${isSettlement(status) ? now : null}
          WHERE reservation_id = ${reservationId}`.pipe(Effect.asVoid, storeFailed("mark_write"))),
    get: (reservationId) =>
      sql`SELECT * FROM write_reservations WHERE reservation_id = ${reservationId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), read)),
        storeFailed("get_write")
      ),
    recover: sql.withTransaction(Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const before = yield* sql`SELECT COUNT(*) AS n FROM write_reservations WHERE status IN ('reserved', 'dispatched', 'committing')`
      yield* sql`UPDATE write_reservations SET status = 'failed', settled_at_ms = ${now} WHERE status IN ('reserved', 'dispatched')`
      yield* sql`UPDATE write_reservations SET status = 'unknown' WHERE status = 'committing'`
      return toInt(before[0]?.n ?? 0)
    })).pipe(storeFailed("recover_writes"))
  })
})

export const layer = Layer.effect(WriteReservations, make)
