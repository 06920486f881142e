/**
 * Statements written in one transaction, all or none, in as few round trips as the driver allows
 * (docs/store.md "Off the event loop"). The SQLite worker client (`sqlite/WorkerSqliteClient.ts`) ships the
 * whole transaction to its worker as ONE message (`BEGIN IMMEDIATE`, the statements, `COMMIT`); any other
 * `SqlClient` runs the statements inside `withTransaction` (`fromClient`). The journal's group commit
 * (`JournalCommit.ts`) writes each batch through it, so a batch costs one round trip to the worker, not one per
 * statement.
 *
 * `insertRows` is the journal's hot path (issue 18): many rows of one table as one flat array of values, then
 * a few more statements, in one transaction. The worker client sends the values as they are and its worker runs
 * them through prepared `INSERT`s of 256, 128, …, 1 rows (cached per row count); other clients get the same
 * `INSERT`s as statements (`rowStatements`). No `effect/sql` statement is built or compiled per batch for the
 * rows on the worker path.
 *
 * `transactionRows` is the same for statements of which only the last one's rows are needed (a Turn's settle: two
 * updates, then the Turn row's `UPDATE … RETURNING`), one message with the worker store.
 *
 * Otherwise only for statements whose results are not needed (inserts, updates). Success proves the transaction committed;
 * `SqlError` means it did not (the worker rolled it back), as with `withTransaction`.
 */
import { Context, Effect, Option } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"

/** A value of a row for `insertRows`: already in the driver's form (no booleans, no `undefined`). */
export type RowValue = string | number | bigint | null

/**
 * Rows of one table: `INSERT INTO <table> (<columns>) VALUES (…), (…)`. `table` and `columns` are identifiers
 * written in our code (never from a peer); `values` holds the rows one after another, `columns.length` each.
 */
export interface RowsInsert {
  readonly table: string
  readonly columns: ReadonlyArray<string>
  readonly values: ReadonlyArray<RowValue>
}

export class SqlBatch extends Context.Service<SqlBatch, {
  /** Runs `statements` in one transaction; inside an open transaction of the caller, on that transaction. */
  readonly transaction: (statements: ReadonlyArray<Statement.Statement<unknown>>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Runs `statements` in one transaction and returns the rows of the LAST one (an `UPDATE … RETURNING`, a
   * `SELECT`): with the worker store the whole transaction is one message (issue 18: a Turn's settle). Inside an
   * open transaction of the caller, on that transaction.
   */
  readonly transactionRows: (
    statements: ReadonlyArray<Statement.Statement<unknown>>
  ) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, SqlError.SqlError>
  /**
   * Runs `before`, inserts `rows`, then runs `then`, in one transaction (a single statement in all runs alone);
   * inside an open transaction of the caller, on that transaction. Succeeds with the rows of the statements of
   * `then` at the indexes `returning` names, in that order (issue 18: a Turn's settle riding the journal's group
   * commit; `[]` without `returning`). `before` holds rows the inserted ones may reference (a Turn's creation).
   */
  readonly insertRows: (
    rows: RowsInsert,
    then: ReadonlyArray<Statement.Statement<unknown>>,
    returning?: ReadonlyArray<number>,
    before?: ReadonlyArray<Statement.Statement<unknown>>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<Record<string, unknown>>>, SqlError.SqlError>
}>()("agentwire/core/dev/SqlBatch") {}

/** Most rows per `INSERT` (stays far below SQLite's and PostgreSQL's parameter limits for a few columns). */
export const maxRowsPerInsert = 256

/**
 * The row counts of the `INSERT`s that carry `rows` rows: 256 while at least 256 are left, then the powers of two
 * of the rest (100 rows are 64 + 32 + 4), so at most 9 distinct statement texts per table exist.
 */
export const insertSizes = (rows: number): Array<number> => {
  const sizes: Array<number> = []
  let left = rows
  for (let size = maxRowsPerInsert; size >= 1; size = size >> 1) {
    while (left >= size) {
      sizes.push(size)
      left -= size
    }
  }
  return sizes
}

/** Whether `sql`'s dialect numbers its placeholders (`$1`, `$2`, …: PostgreSQL) rather than writing `?` (SQLite). */
export const numbersPlaceholders = (sql: SqlClient.SqlClient): boolean =>
  sql.onDialectOrElse({ pg: () => true, orElse: () => false })

/** `text` written with `?` placeholders, numbered `$1`, `$2`, … in order when `numbered` (fixed statement texts). */
export const placeholders = (text: string, numbered: boolean): string => {
  let n = 0
  return numbered ? text.replace(/\?/g, () => `$${++n}`) : text
}

/** `INSERT INTO table (columns) VALUES` and `rows` tuples of placeholders: `?` or, numbered, `$n`. */
export const insertText = (table: string, columns: ReadonlyArray<string>, rows: number, numbered: boolean): string => {
  const tuples: Array<string> = []
  for (let r = 0; r < rows; r++) {
    tuples.push(`(${columns.map((_, c) => numbered ? `$${r * columns.length + c + 1}` : "?").join(", ")})`)
  }
  return `INSERT INTO ${table} (${columns.join(", ")}) VALUES ${tuples.join(", ")}`
}

/**
 * The `INSERT`s of `rows` as `effect/sql` statements, for any client. Their texts are built once per table, columns,
 * row count and dialect and then reused (the drivers keep the prepared statement of each text).
 */
export const rowStatements = (sql: SqlClient.SqlClient) => {
  const numbered = numbersPlaceholders(sql)
  const texts = new Map<string, string>()
  return (rows: RowsInsert): Array<Statement.Statement<unknown>> => {
    const width = rows.columns.length
    const statements: Array<Statement.Statement<unknown>> = []
    let from = 0
    for (const size of insertSizes(rows.values.length / width)) {
      const key = `${rows.table}(${rows.columns.join(",")})${size}`
      let text = texts.get(key)
      if (text === undefined) {
        text = insertText(rows.table, rows.columns, size, numbered)
        texts.set(key, text)
      }
      statements.push(sql.unsafe(text, rows.values.slice(from * width, (from + size) * width)))
      from += size
    }
    return statements
  }
}

/** Runs `statements` one after another on the current connection; the rows of the last one (none: `[]`). */
export const lastRows = (
  statements: ReadonlyArray<Statement.Statement<unknown>>
): Effect.Effect<ReadonlyArray<Record<string, unknown>>, SqlError.SqlError> =>
  Effect.gen(function* () {
    let rows: ReadonlyArray<Record<string, unknown>> = []
    for (const statement of statements) rows = (yield* statement) as ReadonlyArray<Record<string, unknown>>
    return rows
  })

/**
 * Runs `statements` one after another on the current connection; the rows of those at the indexes `returning`
 * names, each shifted by `offset` (the statements before them that are not counted), in the order of `returning`.
 */
export const rowsAt = (
  statements: ReadonlyArray<Statement.Statement<unknown>>,
  returning: ReadonlyArray<number>,
  offset: number
): Effect.Effect<ReadonlyArray<ReadonlyArray<Record<string, unknown>>>, SqlError.SqlError> =>
  Effect.gen(function* () {
    const byIndex = new Map<number, ReadonlyArray<Record<string, unknown>>>()
    const wanted = new Set(returning.map((i) => i + offset))
    for (let i = 0; i < statements.length; i++) {
      const rows = (yield* statements[i]!) as ReadonlyArray<Record<string, unknown>>
      if (wanted.has(i)) byIndex.set(i, rows)
    }
    return returning.map((i) => byIndex.get(i + offset) ?? [])
  })

/** Any client: the statements inside `sql.withTransaction`, one after another (one statement runs alone). */
export const fromClient = (sql: SqlClient.SqlClient): SqlBatch["Service"] => {
  const transaction = (statements: ReadonlyArray<Statement.Statement<unknown>>) =>
    sql.withTransaction(Effect.forEach(statements, (statement) => statement, { discard: true }))
  const toStatements = rowStatements(sql)
  return SqlBatch.of({
    transaction,
    transactionRows: (statements) => sql.withTransaction(lastRows(statements)),
    insertRows: (rows, then, returning, before = []) =>
      Effect.suspend(() => {
        const inserts = toStatements(rows)
        const statements = [...before, ...inserts, ...then]
        if (returning !== undefined && returning.length > 0) {
          const collect = rowsAt(statements, returning, before.length + inserts.length)
          return statements.length === 1 ? collect : sql.withTransaction(collect)
        }
        return Effect.as(statements.length === 1 ? Effect.asVoid(statements[0]!) : transaction(statements), [])
      })
  })
}

/** The batch writer of the current store: its own when the driver provides one, else `fromClient`. */
export const current: Effect.Effect<SqlBatch["Service"], never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return Option.getOrElse(yield* Effect.serviceOption(SqlBatch), () => fromClient(sql))
})
