/**
 * Queued Turns of a dead node on PostgreSQL (pg/TurnClaims.ts, pg/ReleasedTurns.ts): the sweep releases the
 * claims of a node whose `core_nodes` row expired on its **queued** Turns only — never a running Turn, never a
 * Turn of this node or of a live node — and the node the Turn's device is connected to claims and launches each
 * (one node wins when two pick up at once); a Turn whose device is connected nowhere stays queued, unclaimed.
 */
import { assert, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { Gateway } from "../../../../src/core/Gateway.js"
import type { DeviceSession } from "../../../../src/core/DeviceSession.js"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as LeaseSweeper from "../../../../src/core/dev/pg/LeaseSweeper.js"
import { OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import { pickupReleased } from "../../../../src/core/dev/pg/ReleasedTurns.js"
import { claimTurn } from "../../../../src/core/dev/pg/TurnClaims.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnRunner, type TurnPlan } from "../../../../src/core/dev/TurnRunner.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

const nodeA = { nodeId: "node-a", nodeUrl: "http://127.0.0.1:7401", ttlMs: 15_000 }
const nodeB = { nodeId: "node-b", nodeUrl: "http://127.0.0.1:7402", ttlMs: 15_000 }

type Node = Context.Context<OwnerLeases | TurnStore | SessionStore | SqlClient.SqlClient>
class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node }>()("test/ReleasedTurnNodes") {}

const sql = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) => Effect.flatMap(SqlClient.SqlClient, f)

/** A Session bound to `deviceId` with one queued Turn claimed by `node` (running when `running`). */
const claimedTurn = (turnId: string, deviceId: string, node: string, running = false) =>
  Effect.gen(function* () {
    yield* sql((s) => s`INSERT INTO devices (device_id, workspace_id, runtime_type, created_at_ms) VALUES (${deviceId}, 'w', 'x', 0)`)
    yield* sql((s) => s`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms, device_id)
      VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0, ${deviceId})`)
    yield* Effect.flatMap(TurnStore, (t) => t.create({ turnId, sessionId: `s-${turnId}`, runId: `run-${turnId}`, input: { text: "hi" } as any }))
    assert.isTrue(yield* claimTurn(node, turnId))
    if (running) yield* sql((s) => s`UPDATE turns SET status = 'running' WHERE turn_id = ${turnId}`)
  })

const claimedBy = (turnId: string) =>
  Effect.map(sql((s) => s`SELECT claimed_by FROM turns WHERE turn_id = ${turnId}`), (rows) => rows[0]?.claimed_by ?? null)

const nodeRow = (nodeId: string, expiresAtMs: number) =>
  sql((s) => s`INSERT INTO core_nodes (node_id, node_url, expires_at_ms) VALUES (${nodeId}, 'http://x', ${expiresAtMs})`)

/** A gateway with `connected` devices and a runner that records launches (only what `pickupReleased` uses). */
const fakeNode = (connected: ReadonlyArray<string>, launched: Array<TurnPlan>) =>
  Layer.mergeAll(
    Layer.succeed(Gateway, {
      session: (deviceId: string) =>
        Effect.succeed(connected.includes(deviceId) ? Option.some({} as DeviceSession) : Option.none())
    } as unknown as Gateway["Service"]),
    Layer.succeed(TurnRunner, {
      active: () => Option.none(),
      launch: (plan: TurnPlan) => Effect.sync(() => void launched.push(plan))
    } as unknown as TurnRunner["Service"])
  )

describePostgres("Queued Turns of a dead node on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const nodeOf = (identity: typeof nodeA) =>
        Layer.build(OwnerLeases.layer(identity).pipe(
          Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema }))),
          Layer.provide(DevIds.layerTest)
        ))
      return Context.make(Nodes, { a: yield* nodeOf(nodeA), b: yield* nodeOf(nodeB) })
    })))
  const onA = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SessionStore | SqlClient.SqlClient>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.a))
  const onB = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SessionStore | SqlClient.SqlClient>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.b))

  it.effect("releases only the queued Turns of a dead node; the node holding the device dispatches each once", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(20_000)
      // node-c stopped sweeping at 10 s; node-b is alive until 30 s.
      yield* onA(Effect.all([nodeRow("node-c", 10_000), nodeRow("node-b", 30_000)]))
      yield* onA(claimedTurn("t-dead-1", "dev-1", "node-c"))
      yield* onA(claimedTurn("t-dead-2", "dev-2", "node-c"))
      yield* onA(claimedTurn("t-dead-running", "dev-3", "node-c", true))
      yield* onA(claimedTurn("t-live", "dev-4", "node-b"))
      yield* onA(claimedTurn("t-mine", "dev-5", "node-a"))

      yield* onA(LeaseSweeper.sweepOnce)
      assert.strictEqual(yield* onA(claimedBy("t-dead-1")), null)
      assert.strictEqual(yield* onA(claimedBy("t-dead-2")), null)
      assert.strictEqual(yield* onA(claimedBy("t-dead-running")), "node-c")
      assert.strictEqual(yield* onA(claimedBy("t-live")), "node-b")
      assert.strictEqual(yield* onA(claimedBy("t-mine")), "node-a")

      // dev-1 is connected to A and to B (a flap): both pick up at once, one claims and launches it.
      // dev-2 is connected nowhere: it stays queued and unclaimed.
      const onANode: Array<TurnPlan> = []
      const onBNode: Array<TurnPlan> = []
      const [fromA, fromB] = yield* Effect.all([
        onA(pickupReleased((id) => claimTurn("node-a", id)).pipe(Effect.provide(fakeNode(["dev-1"], onANode)))),
        onB(pickupReleased((id) => claimTurn("node-b", id)).pipe(Effect.provide(fakeNode(["dev-1"], onBNode))))
      ], { concurrency: 2 })
      assert.deepStrictEqual([...fromA, ...fromB], ["t-dead-1"])
      const plans = [...onANode, ...onBNode]
      assert.deepStrictEqual(plans.map((p) => [p.turnId, p.deviceId, p.sessionId]), [["t-dead-1", "dev-1", "s-t-dead-1"]])
      assert.strictEqual(yield* onA(claimedBy("t-dead-1")), fromA.length === 1 ? "node-a" : "node-b")
      assert.strictEqual(yield* onA(claimedBy("t-dead-2")), null)
      assert.deepStrictEqual(yield* onA(Effect.map(Effect.flatMap(TurnStore, (t) => t.get("t-dead-2")), (t) => Option.getOrThrow(t).status)), "queued")

      // dev-2 connects to B later: B dispatches it.
      const later: Array<TurnPlan> = []
      assert.deepStrictEqual(yield* onB(pickupReleased((id) => claimTurn("node-b", id)).pipe(Effect.provide(fakeNode(["dev-2"], later)))), ["t-dead-2"])
      assert.deepStrictEqual(later.map((p) => p.turnId), ["t-dead-2"])
      // Nothing more is released: node-b is alive, node-a is this node.
      yield* onB(LeaseSweeper.sweepOnce)
      assert.strictEqual(yield* onA(claimedBy("t-live")), "node-b")
      assert.strictEqual(yield* onA(claimedBy("t-mine")), "node-a")
    }).pipe(Effect.provide(nodes)))
})

describePostgres("A Turn just created on PostgreSQL", (url) => {
  const node = withSchema(url, (schema) =>
    Layer.effectContext(Layer.build(OwnerLeases.layer(nodeA).pipe(
      Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema }))),
      Layer.provide(DevIds.layerTest)
    ))))

  it.effect("is launched once when its start and this node's pickup of released Turns race for it", () =>
    Effect.gen(function* () {
      // Created unclaimed; the pickup's read sees it before the start claims it (the start's claim is run
      // inside the pickup's, right before it): the pickup must lose, only the start launches.
      yield* sql((s) => s`INSERT INTO devices (device_id, workspace_id, runtime_type, created_at_ms) VALUES ('dev-n', 'w', 'x', 0)`)
      yield* sql((s) => s`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms, device_id)
        VALUES ('s-new', 'scripted', 'none', '{}', 0, 'dev-n')`)
      yield* Effect.flatMap(TurnStore, (t) => t.create({ turnId: "t-new", sessionId: "s-new", runId: "run-new", input: { text: "hi" } as any }))
      const launched: Array<TurnPlan> = []
      let started = false
      const picked = yield* pickupReleased((id) =>
        Effect.gen(function* () {
          started = yield* claimTurn("node-a", id)
          return yield* claimTurn("node-a", id)
        })).pipe(Effect.provide(fakeNode(["dev-n"], launched)))
      assert.isTrue(started)
      assert.deepStrictEqual(picked, [])
      assert.deepStrictEqual(launched, [])
      // A restart of the same node resumes its own claimed Turn.
      assert.isTrue(yield* claimTurn("node-a", "t-new", true))
    }).pipe(Effect.provide(node)))
})
