/**
 * An `effect/sql` `SqlClient` whose SQLite connection lives on a worker thread (docs/store.md "Off the event
 * loop"): the dev Core's default file store. The worker (`SqliteWorkerProgram.ts`) owns the `node:sqlite`
 * `DatabaseSync` handle (WAL, `synchronous` from the durability, busy timeout, foreign keys); this side sends each
 * statement (SQL text and parameters) as one message and gets its rows back, so no statement, lock wait or fsync
 * runs on the event loop that carries frames, SSE and heartbeats.
 *
 * - One connection, leased through a one-permit semaphore (`SqlClient.makeSqliteAcquirers`), exactly as the
 *   in-thread client: statements and transactions are serialized, a transaction is a lease of the worker's one
 *   connection (`BEGIN IMMEDIATE` … `COMMIT`, each a message). Whether the connection is inside a transaction
 *   comes with every reply.
 * - `SqlBatch`: a whole transaction of writes as ONE message (the journal's group commit uses it, with the rows of
 *   the statements a write asked for: a Turn's settle riding it).
 * - A round trip, once sent, is waited for even when the caller is interrupted (as a synchronous call was): the
 *   worker runs it anyway, and the transaction state the acquirers read must match what ran.
 * - Errors carry SQLite's result code and map to the same `SqlError` reasons as the in-thread client.
 * - Lifecycle: the worker (effect/workers' Node platform) lives in the caller's scope; closing it asks the worker
 *   to close the database and exit, and terminates it if it has not within 5 s. A worker that crashes or exits
 *   fails every waiting and later statement with `SqlError` (`ConnectionError`, "the SQLite worker stopped"):
 *   callers never hang.
 *
 * It never logs statements or parameters, and no error carries them.
 */
import { NodeWorker } from "@effect/platform-node"
import { Cause, Context, Deferred, Effect, Exit, Layer, type Scope, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, type SqlConnection, SqlError, type Statement } from "effect/sql"
import { Worker, WorkerError } from "effect/workers"
import { Worker as NodeThread } from "node:worker_threads"
import { insertSizes, lastRows, rowsAt, rowStatements, SqlBatch } from "../SqlBatch.js"
import { type NodeSqliteOptions, sqliteClientOver, toParams, toSqlError } from "./NodeSqliteClient.js"
import {
  sqliteWorkerSource,
  type WorkerParams,
  type WorkerReply,
  type WorkerRequest
} from "./SqliteWorkerProgram.js"

/** A request without its id (the client numbers them). */
type Ask = WorkerRequest extends infer R ? R extends WorkerRequest ? Omit<R, "id"> : never : never

/** The client and its one-message transaction writer, both over the same worker connection. */
export interface WorkerSqlite {
  readonly client: SqlClient.SqlClient
  readonly batch: SqlBatch["Service"]
}

const stopped = (detail: string) =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({ cause: detail, message: `the SQLite worker stopped: ${detail}`, operation: "execute" })
  })

/** Why the worker's run ended: a closed scope, or the worker's error (exit code, error event; never a statement). */
const endOf = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return "closed"
  const error = Cause.squash(exit.cause)
  return WorkerError.isWorkerError(error) ? error.message : "worker failed"
}

/** Starts a worker thread running the SQLite program (from source text: the bundle needs no side file). */
export const spawnWorker = (): NodeThread => new NodeThread(sqliteWorkerSource(), { eval: true })

/**
 * Starts the worker, opens the database in it and builds the client. Success proves the worker runs, the file
 * opened and the pragmas applied; the worker and the database belong to the caller's scope. Fails with `SqlError`
 * (the file cannot be opened or is not a database, or the worker could not start). `spawn` is for tests.
 */
export const make = (
  options: NodeSqliteOptions,
  spawn: () => NodeThread = spawnWorker
): Effect.Effect<WorkerSqlite, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const pending = new Map<number, Deferred.Deferred<WorkerReply, SqlError.SqlError>>()
    let nextId = 0
    let inTransaction = false
    let stop: SqlError.SqlError | undefined

    const worker = yield* Effect.gen(function* () {
      const platform = yield* Worker.WorkerPlatform
      return yield* platform.spawn<WorkerReply, WorkerRequest>(0)
    }).pipe(
      Effect.provide(NodeWorker.layer(spawn)),
      Effect.mapError((e) => stopped(e.message))
    )

    const settleAll = (error: SqlError.SqlError) => {
      stop ??= error
      for (const done of pending.values()) Deferred.doneUnsafe(done, Exit.fail(stop))
      pending.clear()
    }
    const onReply = (reply: WorkerReply) =>
      Effect.sync(() => {
        const done = pending.get(reply.id)
        if (done === undefined) return
        pending.delete(reply.id)
        inTransaction = reply.tx
        Deferred.doneUnsafe(done, Exit.succeed(reply))
      })
    // The worker runs (and is closed) with this scope; its end, for any reason, fails whatever still waits.
    yield* worker.run(onReply).pipe(
      Effect.onExit((exit) => Effect.sync(() => settleAll(stopped(endOf(exit))))),
      Effect.forkScoped
    )

    /** One round trip: sent, then awaited uninterruptibly (the worker runs it regardless). */
    const ask = (request: Ask, message: string, operation: string) =>
      Effect.uninterruptible(Effect.suspend(() => {
        if (stop !== undefined) return Effect.fail(stop)
        const id = nextId++
        const done = Deferred.makeUnsafe<WorkerReply, SqlError.SqlError>()
        pending.set(id, done)
        return worker.send({ ...request, id } as WorkerRequest).pipe(
          Effect.catch((e) => Effect.sync(() => settleAll(stopped(e.message)))),
          Effect.andThen(Deferred.await(done)),
          Effect.flatMap((reply) => reply.ok ? Effect.succeed(reply.value) : Effect.fail(toSqlError(reply.error, message, operation)))
        )
      }))

    yield* ask({
      op: "open",
      filename: options.filename,
      busyTimeoutMs: options.busyTimeoutMs ?? 5000,
      durability: options.durability ?? "full"
    }, "Failed to open the database", "open")

    const params = (values: ReadonlyArray<unknown>) => toParams(values) as WorkerParams
    const all = (sql: string, values: ReadonlyArray<unknown>, cached: boolean, arrays: boolean) =>
      ask({ op: "all", sql, params: params(values), cached, arrays }, "Failed to execute statement", "execute") as Effect.Effect<
        ReadonlyArray<any>,
        SqlError.SqlError
      >
    const rows = (sql: string, values: ReadonlyArray<unknown>, cached: boolean, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) =>
      transformRows === undefined ? all(sql, values, cached, false) : Effect.map(all(sql, values, cached, false), transformRows)

    const connection: SqlConnection.Connection = {
      execute: (sql, values, transformRows) => rows(sql, values, true, transformRows),
      executeRaw: (sql, values) => ask({ op: "run", sql, params: params(values) }, "Failed to execute statement", "execute"),
      executeStream: (sql, values, transformRows) => Stream.fromIterableEffect(rows(sql, values, true, transformRows)),
      executeValues: (sql, values) => all(sql, values, true, true),
      executeValuesUnprepared: (sql, values) => all(sql, values, false, true),
      executeUnprepared: (sql, values, transformRows) => rows(sql, values, false, transformRows)
    }

    const { borrower, client } = yield* sqliteClientOver(connection, () => inTransaction, "node-sqlite-worker")

    const compile = (statements: ReadonlyArray<Statement.Statement<unknown>>) =>
      statements.map((statement) => {
        const [sql, values] = statement.compile()
        return [sql, params(values)] as const
      })
    const inCallerTransaction = (statements: ReadonlyArray<Statement.Statement<unknown>>) =>
      Effect.forEach(statements, (statement) => statement, { discard: true })
    const toStatements = rowStatements(client)
    const batch = SqlBatch.of({
      transaction: (statements) =>
        Effect.flatMap(Effect.serviceOption(client.transactionService), (open) => {
          // Inside the caller's own transaction: its statements join it (that transaction gives all or none).
          if (open._tag === "Some") return inCallerTransaction(statements)
          if (statements.length === 0) return Effect.void
          return borrower(() =>
            Effect.asVoid(ask({ op: "batch", statements: compile(statements) }, "Failed to commit the batch", "commit")))
        }),
      // A Turn's settle (issue 18): the whole transaction and the last statement's rows in one round trip.
      transactionRows: (statements) =>
        Effect.flatMap(Effect.serviceOption(client.transactionService), (open) => {
          if (open._tag === "Some") return lastRows(statements)
          if (statements.length === 0) return Effect.succeed([])
          return borrower(() =>
            ask({ op: "batch", statements: compile(statements), rows: true }, "Failed to commit the batch", "commit") as Effect.Effect<
              ReadonlyArray<Record<string, unknown>>,
              SqlError.SqlError
            >)
        }),
      // The rows travel as one flat array of values; the worker builds and keeps the INSERTs (no statement is
      // built or compiled for them here).
      // With `returning` (a Turn's settle riding the batch), the rows of those statements come back in the reply.
      insertRows: (rows, then, returning) =>
        Effect.flatMap(Effect.serviceOption(client.transactionService), (open) => {
          const asked = returning !== undefined && returning.length > 0 ? returning : undefined
          if (open._tag === "Some") {
            const inserts = toStatements(rows)
            return rowsAt([...inserts, ...then], asked ?? [], inserts.length)
          }
          const sizes = insertSizes(rows.values.length / rows.columns.length)
          if (sizes.length + then.length === 0) return Effect.succeed([])
          return borrower(() =>
            Effect.map(ask({
              op: "insert",
              prefix: `INSERT INTO ${rows.table} (${rows.columns.join(", ")}) VALUES`,
              width: rows.columns.length,
              sizes,
              values: rows.values,
              statements: compile(then),
              ...(asked === undefined ? {} : { returning: asked })
            }, "Failed to commit the batch", "commit"), (value) =>
              (value ?? []) as ReadonlyArray<ReadonlyArray<Record<string, unknown>>>))
        })
    })
    return { client, batch }
  })

/** The client (`SqlClient`) and its batch writer (`SqlBatch`) as a layer; the worker stops with the layer. */
export const layer = (options: NodeSqliteOptions) =>
  Layer.effectContext(
    Effect.map(make(options), ({ batch, client }) =>
      Context.make(SqlClient.SqlClient, client).pipe(Context.add(SqlBatch, batch)))
  ).pipe(Layer.provide(Reactivity.layer))
