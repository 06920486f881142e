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
 * sent their commit) and `committing` rows become `unknown`. With owner leases (PostgreSQL, several nodes on
 * one database) a row whose Session's device holds a live lease of another node is left alone: that node may
 * be mid-write (the same filter as Turn recovery). An `unknown` row is never settled automatically: it keeps
 * later writes of its Session refused with `write_unsettled` until an operator, having looked at the file,
 * settles it as `completed` or `failed` (`settleUnknown`, the Files API's settle route).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { OwnerLeases } from "./pg/OwnerLeases.js"
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
  /**
   * An operator's settlement of an `unknown` row (`completed` or `failed`); false when the row is not `unknown`
   * (nothing changed).
   */
  readonly settleUnknown: (reservationId: string, status: "completed" | "failed") => Effect.Effect<boolean, StoreFailed>
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
    settleUnknown: (reservationId, status) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE write_reservations SET status = ${status}, settled_at_ms = ${now}
          WHERE reservation_id = ${reservationId} AND status = 'unknown' RETURNING reservation_id`.pipe(
          Effect.map((rows) => rows.length === 1),
          storeFailed("settle_write")
        )),
    recover: Effect.gen(function* () {
      const leases = yield* Effect.serviceOption(OwnerLeases)
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`SELECT w.reservation_id, w.status, s.device_id FROM write_reservations w
        JOIN sessions s ON s.session_id = w.session_id WHERE w.status IN ('reserved', 'dispatched', 'committing')`.pipe(
        storeFailed("recover_writes")
      )
      let changed = 0
      for (const row of rows) {
        const deviceId = toStringOrUndefined(row.device_id)
        if (Option.isSome(leases) && deviceId !== undefined) {
          const lease = yield* leases.value.get(deviceId)
          if (Option.isSome(lease) && lease.value.expiresAtMs > now && lease.value.nodeId !== leases.value.node.nodeId) continue
        }
        const from = String(row.status)
        const to = from === "committing" ? "unknown" : "failed"
        // Conditional on the status read: a row another process moved meanwhile is not overwritten.
        const updated = yield* sql`UPDATE write_reservations SET status = ${to}, settled_at_ms = ${to === "failed" ? now : null}
          WHERE reservation_id = ${String(row.reservation_id)} AND status = ${from} RETURNING reservation_id`.pipe(
          storeFailed("recover_writes")
        )
        changed += updated.length
      }
      return changed
    })
  })
})

export const layer = Layer.effect(WriteReservations, make)
