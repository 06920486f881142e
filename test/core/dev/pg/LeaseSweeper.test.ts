/**
 * The expired-lease sweeper on PostgreSQL (docs/multi-node.md): it reconciles exactly the running Turns whose
 * recorded owner generation lost the device's lease (expired, or moved to a newer owner), fences an expired
 * owner before reconciling, never touches a Turn of a live owner, and two nodes sweeping at once reconcile a
 * Turn once. The periodic sweep runs on the TestClock.
 */
import { assert, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as LeaseSweeper from "../../../../src/core/dev/pg/LeaseSweeper.js"
import { LeaseLost, OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { toEntry } from "../../../../src/core/dev/TurnJournal.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

const nodeA = { nodeId: "node-a", nodeUrl: "http://127.0.0.1:7401", ttlMs: 15_000 }
const nodeB = { nodeId: "node-b", nodeUrl: "http://127.0.0.1:7402", ttlMs: 15_000 }

type Node = Context.Context<OwnerLeases | TurnStore | SqlClient.SqlClient>

class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node }>()("test/SweeperNodes") {}

/** A Turn of device `deviceId` whose attempt node `owner` began on its current lease (dispatched when `dispatched`). */
const runningTurn = (turnId: string, deviceId: string, dispatched: boolean) =>
  Effect.gen(function* () {
    const leases = yield* OwnerLeases
    const turns = yield* TurnStore
    const lease = yield* leases.claim(deviceId)
    yield* turns.create({ turnId, sessionId: `s-${turnId}`, runId: `run-${turnId}`, input: { text: "hi" } as any })
    const attempt = yield* leases.fenced(lease, turns.beginAttempt(turnId, deviceId, { nodeId: leases.node.nodeId, generation: lease.generation }))
    if (dispatched) {
      yield* leases.fenced(lease, turns.appendEvents(turnId, [{
        seq: 1,
        attempt,
        ...toEntry({ _tag: "Dispatching", type: "execution_start" })
      }]))
    }
    return lease
  })

const sessionFor = (turnId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
      VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0)`)

const statusOf = (turnId: string) =>
  Effect.map(Effect.flatMap(TurnStore, (t) => t.get(turnId)), (t) => {
    const turn = Option.getOrThrow(t)
    return [turn.status, turn.errorCode, turn.observationReason]
  })

describePostgres("LeaseSweeper on PostgreSQL", (url) => {
  const schemaLayer = (schema: string) => PgStore.sqlLayer({ url: Redacted.make(url), schema })
  /** Two nodes, each with its own pool, on one schema. */
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const nodeOf = (identity: typeof nodeA) =>
        Layer.build(OwnerLeases.layer(identity).pipe(
          Layer.provideMerge(Store.layerSql(schemaLayer(schema))),
          Layer.provide(DevIds.layerTest)
        ))
      return Context.make(Nodes, { a: yield* nodeOf(nodeA), b: yield* nodeOf(nodeB) })
    })))
  const onA = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SqlClient.SqlClient>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.a))
  const onB = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SqlClient.SqlClient>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.b))

  it.effect("reconciles a Turn whose owner's lease expired, fencing the owner first; a live owner's Turn is untouched", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000)
      yield* onA(Effect.all([sessionFor("t-dead"), sessionFor("t-live")]))
      const dead = yield* onA(runningTurn("t-dead", "dev-dead", true))
      yield* TestClock.setTime(10_000)
      const live = yield* onA(runningTurn("t-live", "dev-live", false))
      // dev-dead's lease (claimed at 1 s) expired at 16 s; dev-live's (10 s) lives until 25 s.
      yield* TestClock.setTime(17_000)
      const swept = yield* onB(LeaseSweeper.sweepOnce)
      assert.deepStrictEqual(swept.map((s) => s.turnId), ["t-dead"])
      assert.deepStrictEqual(yield* onB(statusOf("t-dead")), ["failed", "delivery_unknown", "core_restarted"])
      assert.deepStrictEqual(yield* onB(statusOf("t-live")), ["running", undefined, undefined])
      // The old owner is fenced: its next write and its renewal are refused.
      const refused = yield* onA(Effect.flip(Effect.flatMap(OwnerLeases, (l) =>
        l.fenced(dead, Effect.flatMap(TurnStore, (t) => t.complete("t-dead", { status: "completed" }))))))
      assert.deepStrictEqual(refused, new LeaseLost({ deviceId: "dev-dead", generation: 1 }))
      assert.deepStrictEqual(yield* onB(statusOf("t-dead")), ["failed", "delivery_unknown", "core_restarted"])
      assert.strictEqual((yield* onA(Effect.flatMap(OwnerLeases, (l) => l.renew(live)))).generation, 1)
      // Nothing more to do on the next sweep.
      assert.deepStrictEqual(yield* onA(LeaseSweeper.sweepOnce), [])
    }).pipe(Effect.provide(nodes)))

  it.effect("reconciles as replaced a Turn whose device took a newer lease on another node", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000)
      yield* onA(sessionFor("t-moved"))
      const old = yield* onA(runningTurn("t-moved", "dev-1", false))
      yield* onB(Effect.flatMap(OwnerLeases, (l) => l.claim("dev-1")))
      const swept = yield* onA(LeaseSweeper.sweepOnce)
      assert.deepStrictEqual(swept.map((s) => s.turnId), ["t-moved"])
      assert.deepStrictEqual(yield* onA(statusOf("t-moved")), ["failed", "delivery_unknown", "replaced"])
      assert.strictEqual(old.generation, 1)
    }).pipe(Effect.provide(nodes)))

  it.effect("two nodes sweeping at once reconcile each Turn once", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000)
      const ids = Array.from({ length: 12 }, (_, i) => `t-${i}`)
      for (const id of ids) {
        yield* onA(sessionFor(id))
        yield* onA(runningTurn(id, `dev-${id}`, true))
      }
      yield* TestClock.setTime(30_000)
      const [fromA, fromB] = yield* Effect.all([onA(LeaseSweeper.sweepOnce), onB(LeaseSweeper.sweepOnce)], { concurrency: 2 })
      const all = [...fromA, ...fromB].map((s) => s.turnId).sort()
      assert.deepStrictEqual(all, [...ids].sort())
      for (const id of ids) assert.deepStrictEqual(yield* onA(statusOf(id)), ["failed", "delivery_unknown", "core_restarted"])
      // Each expired lease moved forward exactly once (one fence per lost owner).
      const generations = yield* onA(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT generation FROM device_leases`))
      assert.deepStrictEqual(generations.map((r) => Number(r.generation)), ids.map(() => 2))
    }).pipe(Effect.provide(nodes)))

  it.effect("sweeps periodically on the clock and renews this node's row", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_000)
      yield* onA(sessionFor("t-p"))
      yield* onA(runningTurn("t-p", "dev-p", true))
      yield* Effect.flatMap(Nodes, (n) => Layer.build(LeaseSweeper.layer({ intervalMs: 5_000 }).pipe(Layer.provide(Layer.succeedContext(n.b)))))
      /** Each sweep ends with the node's heartbeat: waits (bounded, real I/O) for the one the clock released. */
      const swept = (at: number) =>
        Effect.gen(function* () {
          for (let i = 0; i < 200; i++) {
            const rows = yield* onA(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT expires_at_ms FROM core_nodes WHERE node_id = 'node-b'`))
            if (rows.length > 0 && Number(rows[0]!.expires_at_ms) === at + 15_000) return
            yield* TestClock.withLive(Effect.sleep("25 millis"))
          }
          assert.fail(`no sweep at ${at}`)
        })
      yield* TestClock.adjust(4_000)
      assert.deepStrictEqual(yield* onA(statusOf("t-p")), ["running", undefined, undefined])
      yield* TestClock.adjust(1_000)
      yield* swept(6_000) // the lease (until 16 s) is live
      assert.deepStrictEqual(yield* onA(statusOf("t-p")), ["running", undefined, undefined])
      yield* TestClock.adjust(5_000)
      yield* swept(11_000)
      assert.deepStrictEqual(yield* onA(statusOf("t-p")), ["running", undefined, undefined])
      yield* TestClock.adjust(5_000)
      yield* swept(16_000) // expired at this sweep
      assert.deepStrictEqual(yield* onA(statusOf("t-p")), ["failed", "delivery_unknown", "core_restarted"])
    }).pipe(Effect.scoped, Effect.provide(nodes)))
})
