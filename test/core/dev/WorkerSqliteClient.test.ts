/**
 * The SQLite client on a worker thread (src/core/dev/sqlite/WorkerSqliteClient.ts, docs/store.md "Off the event
 * loop"): statements, transactions and errors behave as with the in-thread client; a batch is one transaction,
 * all rows or none; closing the scope closes the database in the worker; a worker that dies fails the waiting and
 * later statements with a typed error instead of leaving them waiting. Whether the event loop stays free is shown
 * in WorkerSqliteClient.live.test.ts (real time).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Metric, Option } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlError } from "effect/sql"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { getPriority, tmpdir } from "node:os"
import { join } from "node:path"
import { Worker as NodeThread } from "node:worker_threads"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as SqlBatchModule from "../../../src/core/dev/SqlBatch.js"
import { SqlBatch } from "../../../src/core/dev/SqlBatch.js"
import * as NodeSqliteClient from "../../../src/core/dev/sqlite/NodeSqliteClient.js"
import * as WorkerSqliteClient from "../../../src/core/dev/sqlite/WorkerSqliteClient.js"
import * as Store from "../../../src/core/dev/Store.js"
import { StoreOpenFailed } from "../../../src/core/dev/StoreErrors.js"

const worker = (filename = ":memory:") =>
  WorkerSqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer))
const inThread = NodeSqliteClient.make({ filename: ":memory:" }).pipe(Effect.provide(Reactivity.layer))

const schema = (sql: SqlClient.SqlClient) =>
  sql`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, flag BOOLEAN, n BIGINT)`

const names = (sql: SqlClient.SqlClient) =>
  Effect.map(sql`SELECT name FROM t ORDER BY id`, (rows) => rows.map((r) => String(r.name)))

/** What a failed statement tells: the reason's tag and its operation (the same on both clients). */
const reasonOf = <A>(effect: Effect.Effect<A, SqlError.SqlError>) =>
  Effect.flip(effect).pipe(Effect.map((e) => ({ tag: e.reason._tag, operation: (e.reason as { operation?: string }).operation })))

/** The nice value of each thread of this process (Linux: `/proc/self/task/<tid>/stat`, field 19). */
const threadNiceValues = (): Array<number> =>
  readdirSync("/proc/self/task").flatMap((tid) => {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
      return [Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16])]
    } catch {
      return [] // the thread exited meanwhile
    }
  })

/** A worker that answers the open, then exits with code 3 on the next request (a crash mid-statement). */
const crashingWorker = () =>
  new NodeThread(
    `const { parentPort } = process.getBuiltinModule("node:worker_threads")
    parentPort.on("message", (m) => {
      if (m === 1) return parentPort.close()
      if (m.op === "open") return parentPort.postMessage({ id: m.id, tx: false, ok: true, value: null })
      process.exit(3)
    })
    parentPort.postMessage(0)`,
    { eval: true }
  )

describe("WorkerSqliteClient", () => {
  it.effect("runs statements on the worker: rows, values, booleans as 0/1, changes", () =>
    Effect.gen(function* () {
      const { client: sql } = yield* worker()
      assert.strictEqual(sql.driver, "node-sqlite-worker")
      yield* schema(sql)
      yield* sql`INSERT INTO t ${sql.insert([{ name: "a", flag: true, n: 7 }, { name: "b", flag: false, n: null }])}`
      assert.deepStrictEqual(yield* sql`SELECT name, flag, n FROM t ORDER BY id`, [
        { name: "a", flag: 1, n: 7 },
        { name: "b", flag: 0, n: null }
      ])
      assert.deepStrictEqual(yield* sql`SELECT name FROM t ORDER BY id`.values, [["a"], ["b"]])
      assert.deepStrictEqual(yield* sql`SELECT name FROM t WHERE id = ${1}`.unprepared, [{ name: "a" }])
      const raw = yield* sql`UPDATE t SET n = 1`.raw
      assert.deepStrictEqual(raw, { changes: 2, lastInsertRowid: 2 })
    }))

  // Issue 18: a reply resumes its waiting caller from the thread's message listener; no fiber per reply (the
  // effect/workers transport forked one for every message it received).
  it.effect("starts no fiber per reply: statements and batches resume their caller directly", () =>
    Effect.gen(function* () {
      let started = 0
      const counting: Metric.FiberRuntimeMetricsService = {
        recordFiberStart: () => void started++,
        recordFiberEnd: () => undefined
      }
      yield* Effect.gen(function* () {
        const { batch, client: sql } = yield* worker()
        yield* schema(sql)
        const before = started
        for (let i = 0; i < 40; i++) yield* sql`SELECT ${i} AS n`
        yield* batch.insertRows({ table: "t", columns: ["name", "n"], values: ["a", 1, "b", 2] }, [])
        yield* batch.transaction([sql`UPDATE t SET n = n + 1`])
        assert.deepStrictEqual(yield* sql`SELECT SUM(n) AS s FROM t`, [{ s: 5 }])
        // 43 round trips; the effect/workers transport started one fiber for each reply.
        assert.isBelow(started - before, 5)
      }).pipe(Effect.provideService(Metric.FiberRuntimeMetrics, counting))
    }))

  it.effect("fails a statement with the same SqlError reason as the in-thread client", () =>
    Effect.gen(function* () {
      const { client: remote } = yield* worker()
      const local = yield* inThread
      for (const sql of [remote, local]) yield* schema(sql)
      for (const sql of [remote, local]) yield* sql`INSERT INTO t (name) VALUES ('a')`
      const failures = (sql: SqlClient.SqlClient) =>
        Effect.all([
          reasonOf(sql`INSERT INTO t (name) VALUES ('a')`),
          reasonOf(sql`INSERT INTO t (name) VALUES (NULL)`),
          reasonOf(sql`SELEKT 1`),
          reasonOf(sql`SELECT * FROM missing`)
        ])
      const expected = yield* failures(local)
      assert.deepStrictEqual(yield* failures(remote), expected)
      assert.deepStrictEqual(expected.map((f) => f.tag), ["UniqueViolation", "ConstraintError", "UnknownError", "UnknownError"])
    }))

  it.effect("rolls a failed transaction back and keeps the connection usable", () =>
    Effect.gen(function* () {
      const { client: sql } = yield* worker()
      yield* schema(sql)
      const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function* () {
        yield* sql`INSERT INTO t (name) VALUES ('x')`
        yield* sql`INSERT INTO t (name) VALUES ('x')`
      })))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(yield* names(sql), [])
      yield* sql.withTransaction(sql`INSERT INTO t (name) VALUES ('y')`)
      assert.deepStrictEqual(yield* names(sql), ["y"])
    }))

  it.effect("commits a batch as one transaction: every row, or none when one statement fails", () =>
    Effect.gen(function* () {
      const { batch, client: sql } = yield* worker()
      yield* schema(sql)
      yield* batch.transaction([sql`INSERT INTO t (name) VALUES ('a')`, sql`INSERT INTO t (name) VALUES ('b')`])
      assert.deepStrictEqual(yield* names(sql), ["a", "b"])
      const failed = yield* reasonOf(batch.transaction([sql`INSERT INTO t (name) VALUES ('c')`, sql`INSERT INTO t (name) VALUES ('a')`]))
      assert.deepStrictEqual(failed, { tag: "UniqueViolation", operation: "commit" })
      assert.deepStrictEqual(yield* names(sql), ["a", "b"])
      // The connection is out of the failed batch's transaction: a plain transaction works.
      yield* sql.withTransaction(sql`INSERT INTO t (name) VALUES ('d')`)
      assert.deepStrictEqual(yield* names(sql), ["a", "b", "d"])
    }))

  it.effect("runs a batch inside the caller's open transaction on that transaction", () =>
    Effect.gen(function* () {
      const { batch, client: sql } = yield* worker()
      yield* schema(sql)
      const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function* () {
        yield* batch.transaction([sql`INSERT INTO t (name) VALUES ('a')`])
        return yield* Effect.fail("abort")
      })))
      assert.deepStrictEqual(exit, Exit.fail("abort"))
      assert.deepStrictEqual(yield* names(sql), [])
    }))

  it.effect("inserts rows as one flat array in INSERTs of 256, 128, …, 1 rows, then the other statements, in one transaction", () =>
    Effect.gen(function* () {
      const { batch, client: sql } = yield* worker()
      yield* schema(sql)
      const rows = (from: number, count: number): SqlBatchModule.RowsInsert => ({
        table: "t",
        columns: ["name", "n"],
        values: Array.from({ length: count }, (_, i) => [`r${from + i}`, from + i]).flat()
      })
      // 300 rows: 256 + 32 + 8 + 4, one message; the UPDATE runs after them in the same transaction.
      yield* batch.insertRows(rows(0, 300), [sql`UPDATE t SET flag = ${true} WHERE n < ${2}`])
      assert.deepStrictEqual(yield* sql`SELECT COUNT(*) AS c, SUM(n) AS s, MIN(name) AS lo, SUM(flag) AS f FROM t`, [
        { c: 300, s: 44850, lo: "r0", f: 2 }
      ])
      // One row alone, and no rows with a statement.
      yield* batch.insertRows(rows(300, 1), [])
      yield* batch.insertRows(rows(301, 0), [sql`UPDATE t SET flag = ${true} WHERE n = ${300}`])
      assert.deepStrictEqual(yield* sql`SELECT name, flag FROM t WHERE n >= ${299} ORDER BY n`, [
        { name: "r299", flag: null },
        { name: "r300", flag: 1 }
      ])
      // A duplicate (r0 again) as the 70th row, in the last INSERT (64 + 4 + 2): none of the rows, not the UPDATE.
      const failed = yield* reasonOf(batch.insertRows(
        { ...rows(400, 69), values: [...rows(400, 69).values, "r0", 999] },
        [sql`UPDATE t SET flag = ${false}`]
      ))
      assert.deepStrictEqual(failed, { tag: "UniqueViolation", operation: "commit" })
      assert.deepStrictEqual(yield* sql`SELECT COUNT(*) AS c, SUM(flag) AS f FROM t`, [{ c: 301, f: 3 }])
      // The connection is out of the failed transaction.
      yield* sql.withTransaction(sql`INSERT INTO t (name) VALUES ('after')`)
    }))

  it.effect("inserts rows the same way through any client (fromClient), and inside the caller's transaction; `before` first", () =>
    Effect.gen(function* () {
      for (const { batch, client: sql } of [yield* worker(), { client: yield* inThread, batch: undefined }]) {
        const rowsOf = batch ?? SqlBatchModule.fromClient(sql)
        yield* schema(sql)
        yield* rowsOf.insertRows({ table: "t", columns: ["name", "n"], values: ["a", 1, "b", 2, "c", 3] }, [])
        assert.deepStrictEqual(yield* names(sql), ["a", "b", "c"])
        const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function* () {
          yield* rowsOf.insertRows({ table: "t", columns: ["name", "n"], values: ["d", 4] }, [sql`DELETE FROM t WHERE name = 'a'`])
          return yield* Effect.fail("abort")
        })))
        assert.deepStrictEqual(exit, Exit.fail("abort"))
        assert.deepStrictEqual(yield* names(sql), ["a", "b", "c"])
        // `before` runs first (a Turn's row before the journal rows that reference it): the DELETE spares the new rows.
        yield* rowsOf.insertRows({ table: "t", columns: ["name", "n"], values: ["e", 5] }, [], undefined, [sql`DELETE FROM t`])
        assert.deepStrictEqual(yield* names(sql), ["e"])
        yield* rowsOf.insertRows({ table: "t", columns: ["name", "n"], values: [] }, [], undefined, [sql`DELETE FROM t`])
        assert.deepStrictEqual(yield* names(sql), [])
        yield* sql.withTransaction(rowsOf.insertRows({ table: "t", columns: ["name", "n"], values: ["f", 6] }, [], undefined, [sql`DELETE FROM t`]))
        assert.deepStrictEqual(yield* names(sql), ["f"])
      }
    }))

  it.effect("runs a transaction and returns its last statement's rows (one message on the worker), all or none, on any client", () =>
    Effect.gen(function* () {
      for (const { batch, client: sql } of [yield* worker(), { client: yield* inThread, batch: undefined }]) {
        const rowsOf = batch ?? SqlBatchModule.fromClient(sql)
        yield* schema(sql)
        yield* sql`INSERT INTO t (name, n) VALUES ('a', 1), ('b', 2)`
        const rows = yield* rowsOf.transactionRows([
          sql`UPDATE t SET flag = ${true} WHERE name = 'a'`,
          sql`UPDATE t SET n = n + 10 WHERE name = 'b' RETURNING name, n`
        ])
        assert.deepStrictEqual(rows, [{ name: "b", n: 12 }])
        assert.deepStrictEqual(yield* sql`SELECT name, flag, n FROM t ORDER BY id`, [
          { name: "a", flag: 1, n: 1 },
          { name: "b", flag: null, n: 12 }
        ])
        // No row matched: no rows. The last statement failing undoes the earlier ones.
        assert.deepStrictEqual(yield* rowsOf.transactionRows([sql`UPDATE t SET n = 0 WHERE name = 'z' RETURNING *`]), [])
        const failed = yield* reasonOf(rowsOf.transactionRows([
          sql`UPDATE t SET flag = ${false} WHERE name = 'a'`,
          sql`UPDATE t SET name = 'a' WHERE name = 'b' RETURNING *`
        ]))
        assert.strictEqual(failed.tag, "UniqueViolation")
        assert.deepStrictEqual(yield* sql`SELECT name, flag FROM t ORDER BY id`, [{ name: "a", flag: 1 }, { name: "b", flag: null }])
        // Inside the caller's transaction: on that transaction (its abort undoes them too).
        const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function* () {
          const inner = yield* rowsOf.transactionRows([sql`UPDATE t SET n = 5 WHERE name = 'a' RETURNING n`])
          assert.deepStrictEqual(inner, [{ n: 5 }])
          return yield* Effect.fail("abort")
        })))
        assert.deepStrictEqual(exit, Exit.fail("abort"))
        assert.deepStrictEqual(yield* sql`SELECT n FROM t WHERE name = 'a'`, [{ n: 1 }])
      }
    }))

  // Issue 18: the worker thread runs 5 nice levels below the thread that started it (Linux only), so a request
  // that wakes it does not take the event loop's CPU for the statement while both want the same CPU.
  // Issue 18: a transaction's statement journal past 64 KiB spilled to a new temporary file (create, unlink,
  // writes) on the worker thread; both clients keep temporary storage in memory.
  it.effect("keeps temporary storage (statement journals, sorts) in memory on both clients", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-temp-store-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const { client: onWorker } = yield* worker(join(dir, "worker.db"))
      const inThreadFile = yield* NodeSqliteClient.make({ filename: join(dir, "thread.db") }).pipe(Effect.provide(Reactivity.layer))
      for (const sql of [onWorker, inThreadFile]) {
        assert.deepStrictEqual(yield* sql`PRAGMA temp_store`, [{ temp_store: 2 }])
      }
    }).pipe(Effect.scoped))

  it.effect.skipIf(process.platform !== "linux" || getPriority() > 14)("runs its thread at a lower priority than the event loop (Linux)", () =>
    Effect.gen(function* () {
      const lowered = getPriority() + 5
      const count = () => threadNiceValues().filter((nice) => nice === lowered).length
      const before = count()
      yield* Effect.scoped(Effect.gen(function* () {
        const { client: sql } = yield* worker()
        yield* sql`SELECT 1`
        assert.strictEqual(count(), before + 1)
      }))
      // Only the worker's own thread was lowered: the caller's priority is unchanged, and the thread is gone.
      assert.strictEqual(getPriority(), lowered - 5)
      assert.strictEqual(count(), before)
    }))

  it.effect("provides its batch writer with the store's default driver", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(Store.sqlLayer(":memory:"))
      assert.strictEqual(Context.get(context, SqlClient.SqlClient).driver, "node-sqlite-worker")
      assert.isTrue(Option.isSome(Context.getOption(context, SqlBatch)))
      const local = yield* Layer.build(Store.sqlLayer(":memory:", undefined, "in-thread"))
      assert.strictEqual(Context.get(local, SqlClient.SqlClient).driver, "node-sqlite")
    }))

  it.effect("fails to open a file in a missing directory with a typed error", () =>
    Effect.gen(function* () {
      const opened = yield* Effect.flip(worker("/nonexistent-agentwire-dir/agentwire.db"))
      assert.strictEqual(opened.reason._tag, "ConnectionError")
      assert.strictEqual((opened.reason as SqlError.ConnectionError).operation, "open")
      const store = yield* Effect.flip(Layer.build(Store.layerFile("/nonexistent-agentwire-dir/agentwire.db").pipe(Layer.provide(DevIds.layerTest))))
      assert.instanceOf(store, StoreOpenFailed)
      assert.strictEqual(store.stage, "open")
    }))

  it.effect("closes the database in the worker and stops the worker when the scope closes", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-worker-"))
      const file = join(dir, "agentwire.db")
      const exits: Array<number> = []
      const spawn = () => {
        const thread = WorkerSqliteClient.spawnWorker()
        thread.on("exit", (code) => exits.push(code))
        return thread
      }
      try {
        yield* Effect.scoped(Effect.gen(function* () {
          const { client: sql } = yield* WorkerSqliteClient.make({ filename: file }, spawn).pipe(Effect.provide(Reactivity.layer))
          yield* schema(sql)
          yield* sql`INSERT INTO t (name) VALUES ('a')`
          assert.isTrue(existsSync(`${file}-wal`))
        }))
        // A clean close checkpoints and removes the WAL; a killed worker would leave it.
        assert.deepStrictEqual(exits, [0])
        assert.isFalse(existsSync(`${file}-wal`))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("fails the waiting and every later statement with a typed error when the worker dies", () =>
    Effect.gen(function* () {
      const { batch, client: sql } = yield* WorkerSqliteClient.make({ filename: ":memory:" }, crashingWorker).pipe(
        Effect.provide(Reactivity.layer)
      )
      const stopped = new SqlError.SqlError({
        reason: new SqlError.ConnectionError({
          cause: "The worker has exited with code: 3",
          message: "the SQLite worker stopped: The worker has exited with code: 3",
          operation: "execute"
        })
      })
      assert.deepStrictEqual(yield* Effect.exit(sql`SELECT 1`), Exit.fail(stopped))
      assert.deepStrictEqual(yield* Effect.exit(sql`SELECT 2`), Exit.fail(stopped))
      assert.deepStrictEqual(yield* Effect.exit(batch.transaction([sql`SELECT 3`])), Exit.fail(stopped))
    }))
})
