/**
 * The journal's group commit (`TurnStore.appendEvents`): the appends of any Turns gathered by `GroupCommit`
 * are stored in one transaction, every row or none; appends fenced on an owner lease are checked against the
 * lease table inside that transaction. An unfenced batch goes through `SqlBatch`: with the SQLite worker that is
 * one message for the whole transaction (`BEGIN IMMEDIATE`, the inserts, `COMMIT`), one round trip per batch.
 */
import { Clock, Effect, Metric } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { BatchInfo, GroupCommit } from "./GroupCommit.js"
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
  /** Also begins the Turn's delivery attempt in the same transaction (`AppendOptions.begin`). */
  readonly begin?: AttemptBegin | undefined
  /**
   * Statements of the caller run in the same transaction before every row of the batch (a Turn's creation,
   * `TurnCreate.ts`, whose row the Turn's first append, in the same batch or a later one, references; a settle's
   * updates), in the order of the writes.
   */
  readonly statements?: ReadonlyArray<Statement.Statement<unknown>> | undefined
  /**
   * A statement run in the same transaction after the rows, whose rows the commit answers to this write (a
   * Turn's settle, `TurnSettle.ts`: the Turn row's `UPDATE … RETURNING *`).
   */
  readonly returning?: Statement.Statement<unknown> | undefined
}

/** What the commit answers to one write: the rows of its `returning` statement (none without one). */
export type JournalAnswer = ReadonlyArray<Record<string, unknown>> | undefined

/** The journal's group commit (`TurnStore`): appends, creates and settles of any Turns. */
export type JournalGroupCommit = GroupCommit<JournalWrite, StoreFailed | LeaseLost, ReadonlyArray<Record<string, unknown>>>

/**
 * A delivery attempt begun by the transaction of its first journal append (issue 18: no commit of its own): the
 * Turn row's `attempt + 1`, `running`, device and owner, as `TurnStore.beginAttempt` writes them, unless the
 * Turn is terminal already.
 */
export interface AttemptBegin {
  readonly deviceId: string
  readonly owner?: { readonly nodeId: string; readonly generation: number } | undefined
}

const columns = ["turn_id", "seq", "attempt", "kind", "type", "body_json", "received_at_ms"] as const

/**
 * Commits journal appends of any Turns in one transaction (the group commit of `appendEvents`): every row of
 * every write is stored, or none; an append that dispatched its Run sets the Turn's `dispatched_at_ms` in the
 * same transaction. The rows go as one flat array of values (`SqlBatch.insertRows`: with the worker store, one
 * message, and INSERTs of 256, 128, …, 1 rows prepared once per row count in the worker). Metrics are recorded
 * per transaction, not per append. Exported for tests that wrap it (a slow or failing commit).
 */
export const commitJournal = (sql: SqlClient.SqlClient, batch: SqlBatch.SqlBatch["Service"] = SqlBatch.fromClient(sql)) => {
  const toStatements = SqlBatch.rowStatements(sql)
  // One generator function per committer, not one per batch (docs/performance.md, "generators").
  const commit: (writes: ReadonlyArray<JournalWrite>, info?: BatchInfo) => Effect.Effect<ReadonlyArray<JournalAnswer> | undefined, StoreFailed | LeaseLost> =
    Effect.fnUntraced(function* (writes: ReadonlyArray<JournalWrite>, info?: BatchInfo) {
      const at = yield* Clock.currentTimeMillis
      const values: Array<SqlBatch.RowValue> = []
      const dispatched: Array<string> = []
      const before: Array<Statement.Statement<unknown>> = []
      const then: Array<Statement.Statement<unknown>> = []
      /** For each write with a `returning` statement: the statement, its index in `then`, and the write's index. */
      const answering: Array<Statement.Statement<unknown>> = []
      const returning: Array<number> = []
      const askers: Array<number> = []
      let fenced = false
      for (let w = 0; w < writes.length; w++) {
        const write = writes[w]!
        if (write.markDispatched === true) dispatched.push(write.turnId)
        if (write.begin !== undefined) then.push(beginStatement(sql, write.turnId, write.begin))
        if (write.statements !== undefined) before.push(...write.statements)
        if (write.returning !== undefined) {
          answering.push(write.returning)
          askers.push(w)
        }
        if (write.fence !== undefined) fenced = true
        for (const event of write.events) {
          values.push(write.turnId, event.seq, event.attempt, event.kind, event.type, event.bodyJson, at)
        }
      }
      const rows: SqlBatch.RowsInsert = { table: "turn_events", columns, values }
      if (dispatched.length > 0) {
        then.push(sql`UPDATE turns SET dispatched_at_ms = ${at}
          WHERE ${sql.in("turn_id", dispatched)} AND dispatched_at_ms IS NULL`)
      }
      // Last, so the rows they answer (a settle's Turn row) include every update of the transaction.
      for (const statement of answering) {
        returning.push(then.length)
        then.push(statement)
      }
      let answered: ReadonlyArray<ReadonlyArray<Record<string, unknown>>>
      if (!fenced) {
        answered = yield* batch.insertRows(rows, then, returning.length > 0 ? returning : undefined, before)
      } else {
        const fences = writes.flatMap((write) => write.fence === undefined ? [] : [write.fence])
        const inserts = toStatements(rows)
        answered = yield* sql.withTransaction(Effect.andThen(
          probeFences(sql, fences),
          SqlBatch.rowsAt([...before, ...inserts, ...then], returning, before.length + inserts.length)
        ))
      }
      // An answer per write only when a write asked for rows (none on the hot path of plain appends).
      let answers: Array<JournalAnswer> | undefined
      if (askers.length > 0) {
        answers = new Array<JournalAnswer>(writes.length).fill(undefined)
        for (let i = 0; i < askers.length; i++) answers[askers[i]!] = answered[i] ?? []
      }
      yield* Metric.update(TurnTelemetry.journalTransactionWrites, writes.length)
      yield* Metric.update(TurnTelemetry.journalBatchSize, values.length / columns.length)
      if (info !== undefined) {
        const end = yield* Clock.currentTimeNanos
        yield* Metric.update(TurnTelemetry.journalCommitSeconds, Number(end - info.openedAtNanos) / 1e9)
      }
      return answers
    }, (effect) =>
      effect.pipe(
        Effect.catchTag("SqlError", (error) =>
          Effect.logWarning("store operation failed").pipe(
            Effect.annotateLogs({ operation: "append_event", reason: error.reason._tag }),
            Effect.andThen(Effect.fail(new StoreFailed({ operation: "append_event" })))
          ))
      ))
  return commit
}
/** The attempt's begin, the same update as `TurnStore.beginAttempt` (a Turn already terminal is left as it is). */
export const beginStatement = (sql: SqlClient.SqlClient, turnId: string, begin: AttemptBegin): Statement.Statement<unknown> =>
  sql`UPDATE turns SET attempt = attempt + 1, status = 'running', device_id = ${begin.deviceId},
      owner_node = ${begin.owner?.nodeId ?? null}, owner_generation = ${begin.owner?.generation ?? null}
    WHERE turn_id = ${turnId} AND status IN ('queued', 'running')`

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
