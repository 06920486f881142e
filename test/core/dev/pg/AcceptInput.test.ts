/**
 * One steered input accepted twice at once on PostgreSQL: the runner's `InputAccepted` fact (TurnFacts.ts) and
 * the steer's own answer (TurnOperations.ts) both call `acceptInput` for it, on two connections. Whatever the
 * interleaving, the input is counted once: both get position 1 and the Turn's cursor is 1 (a multinode e2e run
 * once answered the first steer of a Turn with position 2).
 *
 * Deterministic, no timing: the first acceptance is held before its second statement (its transaction open)
 * while the second one runs until it finished or waits for a lock the first one holds (read from `pg_locks`).
 */
import { assert, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import { layerWith as turnStoreLayer, TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { MessageInput } from "../../../../src/proto/index.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

/**
 * `sql` whose statement number `hold` (from 0, counted from `arm`) first runs `pause` in the caller's fiber (so inside the
 * caller's transaction). Every other use is the client itself.
 */
const holding = (sql: SqlClient.SqlClient, hold: number, pause: Effect.Effect<void>) => {
  let armed = false
  let count = 0
  const proxy = new Proxy(sql, {
    apply: (target, self, args) => {
      const statement = Reflect.apply(target, self, args)
      if (!armed || !Array.isArray(args[0])) return statement
      if (count++ !== hold) return statement
      armed = false
      return Effect.andThen(pause, statement)
    }
  })
  return { sql: proxy, arm: () => { armed = true; count = 0 } }
}

describePostgres("acceptInput on PostgreSQL", (url) => {
  const layer = withSchema(url, (schema) =>
    Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema })).pipe(Layer.provide(DevIds.layerTest)))

  it.effect("counts an input accepted twice at once one time: position 1 for both, cursor 1", () =>
    Effect.scoped(Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const turns = yield* TurnStore
      yield* Effect.flatMap(SessionStore, (s) =>
        s.create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined }))
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      yield* turns.insertInput("t1", "in-1", MessageInput.text("steered"))

      const paused = yield* Deferred.make<number>()
      const resume = yield* Deferred.make<void>()
      // Inside the first acceptance's transaction: its connection's pid, then wait.
      const pause = Effect.gen(function* () {
        const pid = yield* sql`SELECT pg_backend_pid() AS pid`
        yield* Deferred.succeed(paused, Number(pid[0]?.pid))
        yield* Deferred.await(resume)
      }).pipe(Effect.orDie)
      // Held before its second statement: the input row already claimed with the fix, between the two unlocked
      // reads (`status`, then `input_cursor`) without it. `layerWith({})` is a layer of its own (the store's
      // `layer` is memoized: building it again would give the store above, over the plain client).
      const held = holding(sql, 1, pause)
      const heldTurns = Context.get(
        yield* Layer.build(turnStoreLayer({}).pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, held.sql)))),
        TurnStore
      )

      held.arm()
      const first = yield* Effect.forkChild(heldTurns.acceptInput("t1", "in-1"))
      const pid = yield* Deferred.await(paused)
      // The second acceptance (the other path), from outside the first one's transaction.
      const second = yield* Effect.forkChild(turns.acceptInput("t1", "in-1"))
      const blockedByFirst = sql`SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND ${pid} = ANY(pg_blocking_pids(pid))`.pipe(
        Effect.map((rows) => Number(rows[0]?.n) > 0),
        Effect.repeat({ until: (blocked) => blocked })
      )
      yield* Effect.raceFirst(Effect.asVoid(Fiber.await(second)), Effect.asVoid(blockedByFirst))
      yield* Deferred.succeed(resume, undefined)

      assert.deepStrictEqual([yield* Fiber.join(first), yield* Fiber.join(second)], [1, 1])
      const inputs = yield* turns.inputs("t1")
      assert.deepStrictEqual(inputs.map((i) => [i.inputId, i.status, i.position]), [["in-1", "accepted", 1]])
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).inputCursor, 1)
    })).pipe(Effect.provide(layer)))

  it.effect("gives two inputs accepted at once two positions", () =>
    Effect.gen(function* () {
      const turns = yield* TurnStore
      yield* Effect.flatMap(SessionStore, (s) =>
        s.create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined }))
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      const ids = Array.from({ length: 8 }, (_, i) => `in-${i + 1}`)
      yield* Effect.forEach(ids, (id) => turns.insertInput("t1", id, MessageInput.text(id)), { discard: true })
      const positions = yield* Effect.forEach(ids, (id) => turns.acceptInput("t1", id), { concurrency: "unbounded" })
      assert.deepStrictEqual([...positions].sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8])
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).inputCursor, 8)
    }).pipe(Effect.provide(layer)))
})
