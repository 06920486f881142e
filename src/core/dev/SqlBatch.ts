/**
 * Statements written in one transaction, all or none, in as few round trips as the driver allows
 * (docs/store.md "Off the event loop"). The SQLite worker client (`sqlite/WorkerSqliteClient.ts`) ships the
 * whole transaction to its worker as ONE message (`BEGIN IMMEDIATE`, the statements, `COMMIT`); any other
 * `SqlClient` runs the statements inside `withTransaction` (`fromClient`). The journal's group commit
 * (`JournalCommit.ts`) writes each batch through it, so a batch costs one round trip to the worker, not one per
 * statement.
 *
 * Only for statements whose results are not needed (inserts, updates). Success proves the transaction committed;
 * `SqlError` means it did not (the worker rolled it back), as with `withTransaction`.
 */
import { Context, Effect, Option } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"

export class SqlBatch extends Context.Service<SqlBatch, {
  /** Runs `statements` in one transaction; inside an open transaction of the caller, on that transaction. */
  readonly transaction: (statements: ReadonlyArray<Statement.Statement<unknown>>) => Effect.Effect<void, SqlError.SqlError>
}>()("agentwire/core/dev/SqlBatch") {}

/** Any client: the statements inside `sql.withTransaction`, one after another. */
export const fromClient = (sql: SqlClient.SqlClient): SqlBatch["Service"] =>
  SqlBatch.of({
    transaction: (statements) => sql.withTransaction(Effect.forEach(statements, (statement) => statement, { discard: true }))
  })

/** The batch writer of the current store: its own when the driver provides one, else `fromClient`. */
export const current: Effect.Effect<SqlBatch["Service"], never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return Option.getOrElse(yield* Effect.serviceOption(SqlBatch), () => fromClient(sql))
})
