/**
 * An `effect/sql` `SqlClient` over Node's built-in `node:sqlite` (`DatabaseSync`): the dev Core's embedded
 * store (see docs/store.md for why). One connection per process, shared through a one-permit semaphore
 * (`SqlClient.makeSqliteAcquirers`), so statements and transactions are serialized; WAL journal, a busy
 * timeout for a second process on the same file (`agentwire core credential create` next to a running Core),
 * foreign keys on, `BEGIN IMMEDIATE` transactions (the write lock is taken at BEGIN, so a transaction never
 * fails half-way on a lock upgrade).
 *
 * It owns the database handle: the layer's scope closes it. It never logs statements or parameters.
 * Parameters: booleans become 0/1 (SQLite has no boolean type), `undefined` becomes NULL; rows come back as
 * plain objects (integers as numbers).
 */
import { Effect, Layer, Scope, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "effect/sql"
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"

export interface NodeSqliteOptions {
  /** A file path, or `:memory:` (tests). */
  readonly filename: string
  /** How long a statement waits for another process's lock (default 5000 ms). */
  readonly busyTimeoutMs?: number
  /**
   * When a commit is on disk (docs/store.md "Durability"): `full` (the default) fsyncs the WAL at every
   * commit (`synchronous=FULL`), so a committed write survives a power loss; `normal` (`synchronous=NORMAL`)
   * survives a crash of the process but may lose the latest commits on a power loss.
   */
  readonly durability?: Durability
}

/** `full`: every commit fsynced; `normal`: WAL synced at checkpoints only. */
export type Durability = "full" | "normal"


/** Prepared statements kept per connection; past this the cache starts over (the statement set is small). */
const StatementCacheSize = 256

/** node:sqlite errors carry the SQLite result code in `errcode`; Effect's classifier reads `errno`. */
export const toSqlError = (cause: unknown, message: string, operation: string): SqlError.SqlError => {
  const native = cause as { readonly errcode?: unknown; readonly message?: unknown }
  const classified = typeof native?.errcode === "number"
    ? { errno: native.errcode, message: typeof native.message === "string" ? native.message : message }
    : cause
  return new SqlError.SqlError({ reason: SqlError.classifySqliteError(classified, { message, operation }) })
}

const toParam = (value: unknown): SQLInputValue => {
  if (value === undefined) return null
  if (typeof value === "boolean") return value ? 1 : 0
  return value as SQLInputValue
}

export const toParams = (params: ReadonlyArray<unknown>): Array<SQLInputValue> => params.map(toParam)

const plainRows = (rows: ReadonlyArray<Record<string, unknown>>): ReadonlyArray<Record<string, unknown>> =>
  rows.map((row) => ({ ...row }))

const makeConnection = (db: DatabaseSync): SqlConnection.Connection => {
  const cache = new Map<string, StatementSync>()
  const prepare = (sql: string, cached: boolean): StatementSync => {
    if (!cached) return db.prepare(sql)
    const hit = cache.get(sql)
    if (hit !== undefined) return hit
    if (cache.size >= StatementCacheSize) cache.clear()
    const statement = db.prepare(sql)
    cache.set(sql, statement)
    return statement
  }
  const rows = (sql: string, params: ReadonlyArray<unknown>, cached: boolean) =>
    Effect.try({
      try: (): ReadonlyArray<any> => {
        const statement = prepare(sql, cached)
        statement.setReturnArrays(false)
        if (statement.columns().length > 0) return plainRows(statement.all(...toParams(params)))
        statement.run(...toParams(params))
        return []
      },
      catch: (cause) => toSqlError(cause, "Failed to execute statement", "execute")
    })
  const values = (sql: string, params: ReadonlyArray<unknown>, cached: boolean) =>
    Effect.try({
      try: (): ReadonlyArray<ReadonlyArray<unknown>> => {
        const statement = prepare(sql, cached)
        if (statement.columns().length === 0) {
          statement.run(...toParams(params))
          return []
        }
        statement.setReturnArrays(true)
        try {
          return statement.all(...toParams(params)) as unknown as ReadonlyArray<ReadonlyArray<unknown>>
        } finally {
          statement.setReturnArrays(false)
        }
      },
      catch: (cause) => toSqlError(cause, "Failed to execute statement", "execute")
    })
  return {
    execute: (sql, params, transformRows) =>
      transformRows === undefined ? rows(sql, params, true) : Effect.map(rows(sql, params, true), transformRows),
    executeRaw: (sql, params) =>
      Effect.try({
        try: () => {
          const result = prepare(sql, true).run(...toParams(params))
          return { changes: Number(result.changes), lastInsertRowid: result.lastInsertRowid }
        },
        catch: (cause) => toSqlError(cause, "Failed to execute statement", "execute")
      }),
    executeStream: (sql, params, transformRows) =>
      Stream.fromIterableEffect(
        transformRows === undefined ? rows(sql, params, true) : Effect.map(rows(sql, params, true), transformRows)
      ),
    executeValues: (sql, params) => values(sql, params, true),
    executeValuesUnprepared: (sql, params) => values(sql, params, false),
    executeUnprepared: (sql, params, transformRows) =>
      transformRows === undefined ? rows(sql, params, false) : Effect.map(rows(sql, params, false), transformRows)
  }
}

const openDatabase = (options: NodeSqliteOptions) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const db = new DatabaseSync(options.filename, { timeout: options.busyTimeoutMs ?? 5000 })
        try {
          if (options.filename !== ":memory:") db.exec("PRAGMA journal_mode = WAL")
          db.exec(options.durability === "normal" ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL")
          db.exec("PRAGMA foreign_keys = ON")
          // Statement journals and sorts in memory, as the worker's (`SqliteWorkerProgram.ts`): no temporary files.
          db.exec("PRAGMA temp_store = MEMORY")
        } catch (cause) {
          db.close()
          throw cause
        }
        return db
      },
      catch: (cause) => toSqlError(cause, "Failed to open the database", "open")
    }),
    (db) => Effect.sync(() => db.isOpen && db.close())
  )

/**
 * Opens the database and builds the client. Success proves the file opened and the pragmas applied; the
 * handle belongs to the caller's scope and is closed when it closes. Fails with `SqlError` (for example a
 * directory that does not exist, or a file that is not a database).
 */
export const make = (
  options: NodeSqliteOptions
): Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const db = yield* openDatabase(options)
    const connection = makeConnection(db)
    return (yield* sqliteClientOver(connection, () => db.isTransaction, "node-sqlite")).client
  })

/**
 * An effect/sql client over one SQLite connection (in this thread or a worker's): one permit, so a transaction is
 * a lease of the connection; `BEGIN IMMEDIATE` takes the write lock at the start. `borrower` runs work under that
 * permit outside the client (a whole batch sent as one message).
 */
export const sqliteClientOver = (
  connection: SqlConnection.Connection,
  isTransaction: () => boolean,
  driver: string
) =>
  Effect.gen(function* () {
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: yield* Semaphore.make(1),
      isTransaction
    })
    const client = yield* SqlClient.make({
      acquirer: acquirers.acquirer,
      borrower: acquirers.borrower,
      transactionAcquirer: acquirers.transactionAcquirer,
      onCommitFailure: acquirers.onCommitFailure,
      isTransaction: acquirers.isTransaction,
      compiler: Statement.makeCompilerSqlite(),
      driver,
      beginTransaction: "BEGIN IMMEDIATE",
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    return { client, borrower: acquirers.borrower }
  })

/** The client as a layer; the database closes with the layer. */
export const layer = (options: NodeSqliteOptions): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effect(SqlClient.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
