/**
 * The journal's group commit (`TurnStore.appendEvents`): the appends of any Turns gathered by `GroupCommit`
 * are stored in one transaction, every row or none; appends fenced on an owner lease are checked against the
 * lease table inside that transaction. An unfenced batch goes through `SqlBatch`: with the SQLite worker that is
 * one message for the whole transaction (`BEGIN IMMEDIATE`, the inserts, `COMMIT`), one round trip per batch.
 */
import { Array as Arr, Clock, Effect, Metric } from "effect"
import { SqlClient } from "effect/sql"
import { LeaseLost } from "./pg/OwnerLeases.js"
import * as SqlBatch from "./SqlBatch.js"
import { StoreFailed, toInt } from "./StoreErrors.js"
import type { StoredEvent } from "./TurnRecords.js"
import * as TurnTelemetry from "./TurnTelemetry.js"

/** One caller's journal append: entries of one Turn, stored together or not at all. */
export interface JournalWrite {
  readonly turnId: string
  readonly events: ReadonlyArray<Omit<StoredEvent, "receivedAtMs">>
  /** Several nodes: the owner lease this append is fenced on (`JournalFence`). */
  readonly fence?: { readonly deviceId: string; readonly generation: number } | undefined
}

/** Rows per INSERT statement inside one group-commit transaction (stays far below SQLite's parameter limit). */
const rowsPerStatement = 256

/**
 * Commits journal appends of any Turns in one transaction (the group commit of `appendEvents`): every row of
 * every write is stored, or none. Exported for tests that wrap it (a slow or failing commit).
 */
export const commitJournal = (sql: SqlClient.SqlClient, batch: SqlBatch.SqlBatch["Service"] = SqlBatch.fromClient(sql)) =>
  (writes: ReadonlyArray<JournalWrite>): Effect.Effect<void, StoreFailed | LeaseLost> =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const rows = writes.flatMap((write) =>
        write.events.map((event) => ({
          turn_id: write.turnId,
          seq: event.seq,
          attempt: event.attempt,
          kind: event.kind,
          type: event.type,
          body_json: event.bodyJson,
          received_at_ms: at
        })))
      const inserts = Arr.chunksOf(rows, rowsPerStatement).map((chunk) => sql`INSERT INTO turn_events ${sql.insert(chunk)}`)
      const insert = Effect.forEach(inserts, (statement) => statement, { discard: true })
      const fences = writes.flatMap((write) => write.fence === undefined ? [] : [write.fence])
      if (fences.length === 0) {
        yield* inserts.length === 1 ? inserts[0]! : batch.transaction(inserts)
      } else {
        yield* sql.withTransaction(Effect.andThen(probeFences(sql, fences), insert))
      }
      yield* Metric.update(TurnTelemetry.journalTransactionWrites, writes.length)
    }).pipe(
      Effect.catchTag("SqlError", (error) =>
        Effect.logWarning("store operation failed").pipe(
          Effect.annotateLogs({ operation: "append_event", reason: error.reason._tag }),
          Effect.andThen(Effect.fail(new StoreFailed({ operation: "append_event" })))
        ))
    )

/**
 * Inside the batch's transaction: every carried lease must still be its device's generation (PostgreSQL locks
 * them `FOR SHARE`, so a newer claim waits for the commit); else `LeaseLost` for the first stale one.
 */
const probeFences = (sql: SqlClient.SqlClient, fences: ReadonlyArray<{ readonly deviceId: string; readonly generation: number }>) =>
  Effect.gen(function* () {
    const devices = [...new Set(fences.map((f) => f.deviceId))]
    const rows = yield* sql.onDialectOrElse({
      pg: () => sql`SELECT device_id, generation FROM device_leases WHERE ${sql.in("device_id", devices)} FOR SHARE`,
      orElse: () => sql`SELECT device_id, generation FROM device_leases WHERE ${sql.in("device_id", devices)}`
    })
    const current = new Map(rows.map((row) => [String(row.device_id), toInt(row.generation)]))
    for (const fence of fences) {
      if (current.get(fence.deviceId) !== fence.generation) {
        return yield* new LeaseLost({ deviceId: fence.deviceId, generation: fence.generation })
      }
    }
  })
