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
 * - Lifecycle: the worker thread lives in the caller's scope (`Effect.acquireRelease`); closing it asks the worker
 *   to close the database and exit, and terminates it if it has not within 5 s. A worker that crashes or exits
 *   fails every waiting and later statement with `SqlError` (`ConnectionError`, "the SQLite worker stopped"):
 *   callers never hang.
 * - Replies (issue 18): the thread's `message` listener resumes the waiting caller directly (its `Effect.callback`),
 *   so a reply costs no fiber and no `Deferred`; replies come in request order, so the waiting round trips are a
 *   FIFO list (no Map entry, no request copy); the framing is the one `SqliteWorkerProgram.ts` describes.
 *
 * It never logs statements or parameters, and no error carries them.
 */
import { Context, Effect, type Fiber, Layer, type Scope, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, type SqlConnection, SqlError, Statement } from "effect/sql"
import { Worker as NodeThread } from "node:worker_threads"
import { insertSizes, lastRows, rowsAt, rowStatements, SqlBatch } from "../SqlBatch.js"
import { type NodeSqliteOptions, sqliteClientOver, toParams, toSqlError } from "./NodeSqliteClient.js"
import {
  closeMessage,
  sqliteWorkerSource,
  type WorkerParams,
  type WorkerReply,
  type WorkerRequest
} from "./SqliteWorkerProgram.js"

/** A request as built here: `id` is a placeholder the client overwrites when it sends it (no copy per request). */
type Ask = WorkerRequest extends infer R ? R extends WorkerRequest ? Omit<R, "id"> & { id: number } : never : never

/** The client and its one-message transaction writer, both over the same worker connection. */
export interface WorkerSqlite {
  readonly client: SqlClient.SqlClient
  readonly batch: SqlBatch["Service"]
}

const stopped = (detail: string) =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({ cause: detail, message: `the SQLite worker stopped: ${detail}`, operation: "execute" })
  })

/**
 * A round trip waiting for its reply: its caller's resumption, and what a failure of it is called. The worker
 * answers in the order it was asked (one thread, one port), so the waiting round trips are a FIFO list linked
 * through `next` (no Map entry per request); the reply's id is checked against the head.
 */
interface Waiting {
  readonly id: number
  readonly resume: (effect: Effect.Effect<unknown, SqlError.SqlError>) => void
  readonly message: string
  readonly operation: string
  next: Waiting | undefined
}

/** How long a closing worker may take to close the database and exit before it is terminated. */
const closeTimeoutMs = 5000

/** Statements a batch compiler compiles before it is replaced (`freshCompiler` in `make`). */
const compilesPerCompiler = 64

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
    let head: Waiting | undefined
    let tail: Waiting | undefined
    let nextId = 0
    let inTransaction = false
    let stop: SqlError.SqlError | undefined
    let exited = false
    const onExit: Array<() => void> = []

    /** The worker stopped (or is closing): everything waiting and everything later fails with the first reason. */
    const settleAll = (error: SqlError.SqlError) => {
      stop ??= error
      const failed = Effect.fail(stop)
      let waiting = head
      head = tail = undefined
      while (waiting !== undefined) {
        const next = waiting.next
        waiting.resume(failed)
        waiting = next
      }
    }
    const onMessage = (reply: WorkerReply | 0) => {
      if (reply === 0) return // the worker listens (requests sent before that wait in its port)
      const waiting = head
      if (waiting === undefined || waiting.id !== reply.id) return
      head = waiting.next
      if (head === undefined) tail = undefined
      inTransaction = reply.tx
      waiting.resume(reply.ok ? Effect.succeed(reply.value) : Effect.fail(toSqlError(reply.error, waiting.message, waiting.operation)))
    }

    // The thread belongs to this scope: closing asks the worker to close the database and exit (it answers
    // nothing more), and terminates it after `closeTimeoutMs`.
    const thread = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          const started = spawn()
          started.on("message", onMessage)
          started.on("messageerror", () => settleAll(stopped("A messageerror event was emitted")))
          started.on("error", () => settleAll(stopped("An error event was emitted")))
          started.on("exit", (code) => {
            exited = true
            settleAll(stopped(`The worker has exited with code: ${code}`))
            for (const done of onExit.splice(0)) done()
          })
          return started
        },
        catch: (cause) => stopped(cause instanceof Error ? cause.message : "the worker could not start")
      }),
      (started) =>
        Effect.callback<void>((resume) => {
          settleAll(stopped("closed"))
          if (exited) return resume(Effect.void)
          const timer = setTimeout(() => void started.terminate(), closeTimeoutMs)
          onExit.push(() => {
            clearTimeout(timer)
            resume(Effect.void)
          })
          try {
            started.postMessage(closeMessage)
          } catch {
            void started.terminate()
          }
        })
    )

    /** One round trip: sent, then awaited uninterruptibly (the worker runs it regardless). */
    const ask = (request: Ask, message: string, operation: string) =>
      Effect.uninterruptible(Effect.callback<unknown, SqlError.SqlError>((resume) => {
        if (stop !== undefined) return resume(Effect.fail(stop))
        const waiting: Waiting = { id: nextId++, resume, message, operation, next: undefined }
        if (tail === undefined) head = waiting
        else tail.next = waiting
        tail = waiting
        request.id = waiting.id
        try {
          thread.postMessage(request)
        } catch (cause) {
          settleAll(stopped(cause instanceof Error ? cause.message : "Failed to send message to worker"))
        }
      }))

    yield* ask({
      id: 0,
      op: "open",
      filename: options.filename,
      busyTimeoutMs: options.busyTimeoutMs ?? 5000,
      durability: options.durability ?? "full"
    }, "Failed to open the database", "open")

    /** The values as SQLite takes them; the compiled array itself when none needs converting (no copy). */
    const params = (values: ReadonlyArray<unknown>): WorkerParams => {
      for (let i = 0; i < values.length; i++) {
        const value = values[i]
        if (value === undefined || typeof value === "boolean") return toParams(values) as WorkerParams
      }
      return values as WorkerParams
    }
    const all = (sql: string, values: ReadonlyArray<unknown>, cached: boolean, arrays: boolean) =>
      ask({ id: 0, op: "all", sql, params: params(values), cached, arrays }, "Failed to execute statement", "execute") as Effect.Effect<
        ReadonlyArray<any>,
        SqlError.SqlError
      >
    const rows = (sql: string, values: ReadonlyArray<unknown>, cached: boolean, transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) =>
      transformRows === undefined ? all(sql, values, cached, false) : Effect.map(all(sql, values, cached, false), transformRows)

    const connection: SqlConnection.Connection = {
      execute: (sql, values, transformRows) => rows(sql, values, true, transformRows),
      executeRaw: (sql, values) => ask({ id: 0, op: "run", sql, params: params(values) }, "Failed to execute statement", "execute"),
      executeStream: (sql, values, transformRows) => Stream.fromIterableEffect(rows(sql, values, true, transformRows)),
      executeValues: (sql, values) => all(sql, values, true, true),
      executeValuesUnprepared: (sql, values) => all(sql, values, false, true),
      executeUnprepared: (sql, values, transformRows) => rows(sql, values, false, transformRows)
    }

    const { borrower, client } = yield* sqliteClientOver(connection, () => inTransaction, "node-sqlite-worker")

    /**
     * The batch's statements compile on a compiler replaced every `compilesPerCompiler` statements (the client's own
     * renders the same SQL): a compiler caches what it compiled in a `WeakMap` keyed by each statement, and one that
     * lives long keeps every statement it saw, with its values, through scavenges (docs/performance.md "freshmaps").
     */
    let compiler = Statement.makeCompilerSqlite()
    let compiled = 0
    const freshCompiler = () => {
      if (++compiled > compilesPerCompiler) {
        compiled = 1
        compiler = Statement.makeCompilerSqlite()
      }
      return compiler
    }
    const compile = (statements: ReadonlyArray<Statement.Statement<unknown>>) =>
      statements.map((statement) => {
        const compiled = freshCompiler().compile(statement, false)
        const values = params(compiled[1])
        return values === compiled[1] ? compiled as readonly [string, WorkerParams] : [compiled[0], values] as const
      })
    const inCallerTransaction = (statements: ReadonlyArray<Statement.Statement<unknown>>) =>
      Effect.forEach(statements, (statement) => statement, { discard: true })
    const toStatements = rowStatements(client)
    /** Whether the caller is inside its own transaction (read off its fiber: no Option, no extra step). */
    const callerTransaction = (fiber: Fiber.Fiber<unknown, unknown>) =>
      Context.getOrUndefined(fiber.context, client.transactionService) !== undefined
    const batch = SqlBatch.of({
      transaction: (statements) =>
        Effect.withFiber((fiber) => {
          // Inside the caller's own transaction: its statements join it (that transaction gives all or none).
          if (callerTransaction(fiber)) return inCallerTransaction(statements)
          if (statements.length === 0) return Effect.void
          return borrower(() =>
            Effect.asVoid(ask({ id: 0, op: "batch", statements: compile(statements) }, "Failed to commit the batch", "commit")))
        }),
      // A Turn's settle (issue 18): the whole transaction and the last statement's rows in one round trip.
      transactionRows: (statements) =>
        Effect.withFiber((fiber) => {
          if (callerTransaction(fiber)) return lastRows(statements)
          if (statements.length === 0) return Effect.succeed([])
          return borrower(() =>
            ask({ id: 0, op: "batch", statements: compile(statements), rows: true }, "Failed to commit the batch", "commit") as Effect.Effect<
              ReadonlyArray<Record<string, unknown>>,
              SqlError.SqlError
            >)
        }),
      // The rows travel as one flat array of values; the worker builds and keeps the INSERTs (no statement is
      // built or compiled for them here).
      // With `returning` (a Turn's settle riding the batch), the rows of those statements come back in the reply.
      insertRows: (rows, then, returning, before = []) =>
        Effect.withFiber((fiber) => {
          const asked = returning !== undefined && returning.length > 0 ? returning : undefined
          if (callerTransaction(fiber)) {
            const inserts = toStatements(rows)
            return rowsAt([...before, ...inserts, ...then], asked ?? [], before.length + inserts.length)
          }
          const sizes = insertSizes(rows.values.length / rows.columns.length)
          if (before.length + sizes.length + then.length === 0) return Effect.succeed([])
          return borrower(() =>
            Effect.map(ask({
              id: 0,
              op: "insert",
              prefix: `INSERT INTO ${rows.table} (${rows.columns.join(", ")}) VALUES`,
              width: rows.columns.length,
              sizes,
              values: rows.values,
              statements: compile(then),
              ...(before.length === 0 ? {} : { before: compile(before) }),
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
