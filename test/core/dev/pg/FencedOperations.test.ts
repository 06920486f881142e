/**
 * Fenced Turn operations on PostgreSQL (TurnOperations.ts, docs/multi-node.md "Fenced Turn writes"): the
 * records of a steer written by a node whose owner lease of the device is no longer the newest are refused like
 * the runner's journal writes. Stale before the send: nothing is stored and nothing is sent (409 device_offline).
 * Stale by the receipt: the receipt is not stored (the input stays `sending` for the sweeper) and the operator
 * is answered `unknown`, reason `owner_replaced`. On the live owner both records are stored.
 */
import { assert, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import type { OperatorConflict } from "../../../../src/core/dev/OperatorErrors.js"
import { type Lease, OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import * as TurnOperations from "../../../../src/core/dev/TurnOperations.js"
import { type Active, TurnRunner } from "../../../../src/core/dev/TurnRunner.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { MessageInput } from "../../../../src/proto/index.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

const nodeA = { nodeId: "node-a", nodeUrl: "http://127.0.0.1:7401", ttlMs: 15_000 }
const nodeB = { nodeId: "node-b", nodeUrl: "http://127.0.0.1:7402", ttlMs: 15_000 }

type Node = Context.Context<OwnerLeases | TurnStore | SqlClient.SqlClient | DevIds>
class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node }>()("test/FencedOperationNodes") {}

/**
 * Node A's operations over one live Turn on `fence`, whose delivery counts steers and runs `duringSend` while
 * "sending" (e.g. another node takes the lease).
 */
const operationsOver = (turnId: string, fence: Lease, sent: Array<string>, duringSend: Effect.Effect<void>) =>
  Effect.gen(function* () {
    const active = {
      turnId,
      sessionId: `s-${turnId}`,
      deviceId: "dev-1",
      pending: new Map(),
      calls: new Map(),
      cancelQueued: yield* Deferred.make<void>(),
      finished: yield* Deferred.make<void>(),
      fence,
      current: {
        delivery: { steer: (inputId: string) => Effect.andThen(Effect.sync(() => void sent.push(inputId)), duringSend) }
      }
    } as unknown as Active
    return yield* TurnOperations.make.pipe(Effect.provideService(TurnRunner, {
      active: (id: string) => (id === turnId ? Option.some(active) : Option.none())
    } as unknown as TurnRunner["Service"]))
  })

const inputRows = (turnId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql`SELECT input_id, status FROM turn_inputs WHERE turn_id = ${turnId} ORDER BY input_id`, (rows) =>
      rows.map((r) => [String(r.input_id), String(r.status)])))

describePostgres("Fenced Turn operations on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const nodeOf = (identity: typeof nodeA) =>
        Layer.build(OwnerLeases.layer(identity).pipe(
          Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema }))),
          Layer.provideMerge(DevIds.layerTest)
        ))
      return Context.make(Nodes, { a: yield* nodeOf(nodeA), b: yield* nodeOf(nodeB) })
    })))
  const onA = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SqlClient.SqlClient | DevIds>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.a))
  const onB = <A, E>(e: Effect.Effect<A, E, OwnerLeases | TurnStore | SqlClient.SqlClient | DevIds>) =>
    Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n.b))
  const claimOn = (on: typeof onA) => on(Effect.flatMap(OwnerLeases, (l) => l.claim("dev-1")))

  const turn = (turnId: string) =>
    onA(Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
        VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0)`
      yield* Effect.flatMap(TurnStore, (t) => t.create({ turnId, sessionId: `s-${turnId}`, runId: `run-${turnId}`, input: MessageInput.text("hi") }))
    }))

  it.effect("a steer on the live owner stores both records; on a stale owner nothing is stored or sent", () =>
    Effect.gen(function* () {
      yield* turn("t-1")
      const lease = yield* claimOn(onA)
      const sent: Array<string> = []
      const ops = yield* onA(operationsOver("t-1", lease, sent, Effect.void))
      const accepted = yield* onA(ops.steer("t-1", MessageInput.text("more"), "in-1"))
      assert.deepStrictEqual(accepted, { input_id: "in-1", status: "accepted", position: 1 })

      yield* claimOn(onB) // the device connected to B: A's generation is stale
      const refused = yield* onA(Effect.flip(ops.steer("t-1", MessageInput.text("again"), "in-2")))
      assert.strictEqual((refused as OperatorConflict).reason, "device_offline")
      assert.deepStrictEqual(sent, ["in-1"])
      assert.deepStrictEqual(yield* onA(inputRows("t-1")), [["in-1", "accepted"]])
    }).pipe(Effect.provide(nodes)))

  it.effect("a steer whose owner is replaced during the send is answered unknown, its receipt not stored", () =>
    Effect.gen(function* () {
      yield* turn("t-2")
      const lease = yield* claimOn(onA)
      const sent: Array<string> = []
      const nodesNow = yield* Nodes
      const replace = Effect.asVoid(Effect.orDie(Effect.provideService(claimOn(onB), Nodes, nodesNow)))
      const ops = yield* onA(operationsOver("t-2", lease, sent, replace))
      const result = yield* onA(ops.steer("t-2", MessageInput.text("more"), "in-1"))
      assert.deepStrictEqual(result, { input_id: "in-1", status: "unknown", reason: TurnOperations.OwnerReplaced })
      assert.deepStrictEqual(sent, ["in-1"])
      assert.deepStrictEqual(yield* onA(inputRows("t-2")), [["in-1", "sending"]])
    }).pipe(Effect.provide(nodes)))
})
