/**
 * The store off the event loop (issue 18, docs/store.md "Off the event loop"), on real time: while a statement
 * of the dev Core's default store waits in its worker (here: for a write lock the test holds), timers on the main
 * thread keep firing. Judged by order, not by duration: the statement cannot finish before the lock is released,
 * and the lock is released only after three timers fired one after another. The negative control runs the same
 * statement on the in-thread client: it blocks the thread until its busy timeout gives up, so it ends before any
 * timer fires.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import * as NodeSqliteClient from "../../../src/core/dev/sqlite/NodeSqliteClient.js"
import * as Store from "../../../src/core/dev/Store.js"

/** A database file with the table, and a second connection on the test's thread that can hold the write lock. */
const withLockedFile = <A, E, R>(body: (file: string, holder: DatabaseSync) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-offloop-"))
      const file = join(dir, "agentwire.db")
      const holder = new DatabaseSync(file)
      holder.exec("PRAGMA journal_mode = WAL")
      holder.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
      return { dir, file, holder }
    }),
    ({ file, holder }) => body(file, holder),
    ({ dir, holder }) =>
      Effect.sync(() => {
        if (holder.isOpen) holder.close()
        rmSync(dir, { recursive: true, force: true })
      })
  )

/** Starts `statement` while the write lock is held, lets three main-thread timers fire, releases the lock. */
const race = (holder: DatabaseSync, statement: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function* () {
    const order: Array<string> = []
    holder.exec("BEGIN IMMEDIATE")
    const running = yield* statement.pipe(
      Effect.ensuring(Effect.sync(() => order.push("statement ended"))),
      Effect.exit,
      Effect.forkChild
    )
    for (let i = 0; i < 3; i++) {
      yield* Effect.sleep("20 millis")
      order.push("timer")
    }
    holder.exec("COMMIT")
    return { order, exit: yield* Fiber.join(running) }
  })

describe("WorkerSqliteClient (real time)", () => {
  it.live("keeps main-thread timers firing while a store statement waits in the worker", () =>
    withLockedFile((file, holder) =>
      Effect.gen(function* () {
        const context = yield* Layer.build(Store.sqlLayer(file))
        const sql = Context.get(context, SqlClient.SqlClient)
        assert.strictEqual(sql.driver, "node-sqlite-worker")
        const { exit, order } = yield* race(holder, sql`INSERT INTO t (name) VALUES ('waited')`)
        assert.deepStrictEqual(order, ["timer", "timer", "timer", "statement ended"])
        assert.isTrue(Exit.isSuccess(exit))
        assert.deepStrictEqual(yield* sql`SELECT name FROM t`, [{ name: "waited" }])
      })
    ))

  it.live("negative control: the in-thread client blocks the timers until its statement gives up", () =>
    withLockedFile((file, holder) =>
      Effect.gen(function* () {
        const sql = yield* NodeSqliteClient.make({ filename: file, busyTimeoutMs: 200 }).pipe(Effect.provide(Reactivity.layer))
        const { exit, order } = yield* race(holder, sql`INSERT INTO t (name) VALUES ('waited')`)
        assert.deepStrictEqual(order, ["statement ended", "timer", "timer", "timer"])
        assert.isTrue(Exit.isFailure(exit))
      })
    ))
})
