/**
 * How a reply of the SQLite worker reaches its caller (src/core/dev/sqlite/WorkerSqliteClient.ts, issue 18): the
 * worker answers in request order and the client resumes the head of its FIFO list of waiting round trips. A
 * caller interrupted while its reply is pending waits for that reply (the worker runs the statement regardless)
 * and the next caller gets its own reply, not the interrupted one's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { Reactivity } from "effect/reactivity"
import { Worker as NodeThread } from "node:worker_threads"
import * as WorkerSqliteClient from "../../../src/core/dev/sqlite/WorkerSqliteClient.js"

/** A worker that echoes each statement's SQL as its rows, holding a statement with "hold" until told to release. */
const holdingSource = `const { parentPort } = process.getBuiltinModule("node:worker_threads")
let held
const answer = (m) => parentPort.postMessage({ id: m.id, tx: false, ok: true, value: m.op === "open" ? null : [{ sql: m.sql }] })
parentPort.on("message", (m) => {
  if (m === 1) return parentPort.close()
  if (m === "release") { const h = held; held = undefined; return h === undefined ? undefined : answer(h) }
  if (m.op === "all" && m.sql.includes("hold")) { held = m; return parentPort.postMessage("held") }
  answer(m)
})
parentPort.postMessage(0)`

describe("WorkerSqliteClient replies", () => {
  it.effect("an interrupted caller waits for its pending reply and the next caller gets its own", () =>
    Effect.gen(function* () {
      let thread: NodeThread | undefined
      const held = Effect.callback<void>((resume) => {
        thread!.on("message", (m) => m === "held" && resume(Effect.void))
      })
      const { client: sql } = yield* WorkerSqliteClient.make({ filename: ":memory:" }, () => {
        thread = new NodeThread(holdingSource, { eval: true })
        return thread
      }).pipe(Effect.provide(Reactivity.layer))
      const waiting = yield* Effect.forkChild(held)
      const caller = yield* Effect.forkChild(sql`SELECT 'hold'`)
      yield* Fiber.join(waiting) // the worker holds the caller's statement: its reply is pending
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(caller))
      yield* Effect.yieldNow
      assert.isUndefined(caller.pollUnsafe(), "the interrupted caller still waits for its reply")
      thread!.postMessage("release")
      yield* Fiber.join(interrupting)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(caller)))
      assert.deepStrictEqual(yield* sql`SELECT 'next'`, [{ sql: "SELECT 'next'" }])
      assert.deepStrictEqual(yield* sql`SELECT 'after'`, [{ sql: "SELECT 'after'" }])
    }))
})
