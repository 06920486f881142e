/**
 * The journal's group commit (`TurnStore.appendEvents`): the appends of any Turns gathered by `GroupCommit`
 * are stored in one transaction, every row or none; appends fenced on an owner lease are checked against the
 * lease table inside that transaction. An unfenced batch goes through `SqlBatch`: with the SQLite worker that is
 * one message for the whole transaction (`BEGIN IMMEDIATE`, the inserts, `COMMIT`), one round trip per batch.
 */
import { Clock, Effect, Metric } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { BatchInfo } from "./GroupCommit.js"
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
  /** Also sets the Turn's `dispatched_at_ms` (first time only) in the same transaction (`AppendOptions`). */
  readonly markDispatched?: boolean | undefined
}

/** Most rows per INSERT statement inside one group-commit transaction (stays far below SQLite's parameter limit). */
const rowsPerStatement = 256

const columns = ["turn_id", "seq", "attempt", "kind", "type", "body_json", "received_at_ms"] as const

/**
 * The text of an INSERT of `rows` journal rows (a power of two), built once per row count and dialect and then reused (issue 18:
 * not compiled again through the statement builder for every batch; the worker keeps the prepared statement
 * of each text). Parameters are placeholders: `?` (SQLite) or `$n` (PostgreSQL).
 */
const insertTexts = (numbered: boolean) => {
  const texts = new Map<number, string>()
  return (rows: number): string => {
    let text = texts.get(rows)
    if (text === undefined) {
      const tuples: Array<string> = []
      for (let r = 0; r < rows; r++) {
        tuples.push(`(${columns.map((_, c) => numbered ? `$${r * columns.length + c + 1}` : "?").join(", ")})`)
      }
      text = `INSERT INTO turn_events (${columns.join(", ")}) VALUES ${tuples.join(", ")}`
      texts.set(rows, text)
    }
    return text
  }
}

/**
 * Commits journal appends of any Turns in one transaction (the group commit of `appendEvents`): every row of
 * every write is stored, or none; an append that dispatched its Run sets the Turn's `dispatched_at_ms` in the
 * same transaction. Metrics are recorded per transaction, not per append. Exported for tests that wrap it (a
 * slow or failing commit).
 */
export const commitJournal = (sql: SqlClient.SqlClient, batch: SqlBatch.SqlBatch["Service"] = SqlBatch.fromClient(sql)) => {
  const insertText = insertTexts(sql.onDialectOrElse({ pg: () => true, orElse: () => false }))
  return (writes: ReadonlyArray<JournalWrite>, info?: BatchInfo): Effect.Effect<void, StoreFailed | LeaseLost> =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const values: Array<unknown> = []
      const dispatched: Array<string> = []
      for (const write of writes) {
        if (write.markDispatched === true) dispatched.push(write.turnId)
        for (const event of write.events) {
          values.push(write.turnId, event.seq, event.attempt, event.kind, event.type, event.bodyJson, at)
        }
      }
      const total = values.length / columns.length
      // Rows in chunks of 256, 128, …, 1 (a batch of 100 rows is 64 + 32 + 4): at most 9 distinct statement
      // texts, so the worker's prepared-statement cache keeps them all.
      const statements: Array<Statement.Statement<unknown>> = []
      let from = 0
      for (let size = rowsPerStatement; size >= 1; size = size >> 1) {
        while (total - from >= size) {
          statements.push(sql.unsafe(insertText(size), values.slice(from * columns.length, (from + size) * columns.length)))
          from += size
        }
      }
      if (dispatched.length > 0) {
        statements.push(sql`UPDATE turns SET dispatched_at_ms = ${at}
          WHERE ${sql.in("turn_id", dispatched)} AND dispatched_at_ms IS NULL`)
      }
      const fences = writes.flatMap((write) => write.fence === undefined ? [] : [write.fence])
      if (fences.length === 0) {
        yield* statements.length === 1 ? statements[0]! : batch.transaction(statements)
      } else {
        yield* sql.withTransaction(Effect.andThen(
          probeFences(sql, fences),
          Effect.forEach(statements, (statement) => statement, { discard: true })
        ))
      }
      yield* Metric.update(TurnTelemetry.journalTransactionWrites, writes.length)
      yield* Metric.update(TurnTelemetry.journalBatchSize, total)
      if (info !== undefined) {
        const end = yield* Clock.currentTimeNanos
        yield* Metric.update(TurnTelemetry.journalCommitSeconds, Number(end - info.openedAtNanos) / 1e9)
      }
    }).pipe(
      Effect.catchTag("SqlError", (error) =>
        Effect.logWarning("store operation failed").pipe(
          Effect.annotateLogs({ operation: "append_event", reason: error.reason._tag }),
          Effect.andThen(Effect.fail(new StoreFailed({ operation: "append_event" })))
        ))
    )
}
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
