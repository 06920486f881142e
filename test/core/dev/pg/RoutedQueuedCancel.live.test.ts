/**
 * A cancel of a queued Turn whose device is offline, received on a node that does not run it (pg/RoutedTurns.ts):
 * routed to the node that claimed the Turn (`turns.claimed_by`, alive in `core_nodes`), whose runner waits
 * there, and answered with that node's result; when the claimer is dead the answer stays `device_offline`
 * (nothing sent). Real PostgreSQL, two routers on one schema, live clock (LISTEN connections); nothing asserts
 * a duration.
 */
import { assert, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted, Ref } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import type { OperatorConflict } from "../../../../src/core/dev/OperatorErrors.js"
import { NodeRouter } from "../../../../src/core/dev/pg/NodeRouter.js"
import { OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as RoutedTurns from "../../../../src/core/dev/pg/RoutedTurns.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnRunner } from "../../../../src/core/dev/TurnRunner.js"
import type { CancelResult } from "../../../../src/core/dev/TurnViews.js"
import { MessageInput } from "../../../../src/proto/index.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

type Routing = RoutedTurns.Routing
class Nodes extends Context.Service<Nodes, {
  readonly a: Routing
  readonly sql: SqlClient.SqlClient
  /** Local cancels each node ran. */
  readonly ran: Ref.Ref<ReadonlyArray<string>>
}>()("test/RoutedQueuedCancel/Nodes") {}

const unused = () => Effect.die("not used in this test")

describePostgres("Routed cancel of a queued Turn on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const ran = yield* Ref.make<ReadonlyArray<string>>([])
      const nodeOf = (nodeId: string) =>
        Effect.gen(function* () {
          const ctx = yield* Layer.build(Layer.mergeAll(
            NodeRouter.layer({ nodeId, pollInterval: "100 millis", timeout: "20 seconds" }),
            OwnerLeases.layer({ nodeId, nodeUrl: `http://${nodeId}`, ttlMs: 15_000 })
          ).pipe(
            Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema, maxConnections: 4 }))),
            Layer.provideMerge(DevIds.layer)
          ))
          const local: RoutedTurns.LocalTurnOperations = {
            start: unused,
            steer: unused,
            answerPermission: unused,
            answerUserChoice: unused,
            functionResult: unused,
            cancel: (turnId) =>
              Effect.as(Ref.update(ran, (r) => [...r, `${nodeId}:${turnId}`]), { status: "cancelled", delivery_id: null, abandoned: true } satisfies CancelResult)
          }
          const routing = yield* RoutedTurns.make(local).pipe(
            Effect.provideContext(ctx),
            Effect.provideService(TurnRunner, { active: () => Option.none() } as unknown as TurnRunner["Service"])
          )
          return { routing, sql: Context.get(ctx, SqlClient.SqlClient) }
        })
      const a = yield* nodeOf("node-a")
      yield* nodeOf("node-b")
      return Context.make(Nodes, { a: a.routing, sql: a.sql, ran })
    })))

  /** A queued Turn of an offline device (no lease), claimed by node-b, alive until `aliveUntil`. */
  const queuedOnB = (turnId: string, aliveUntil: number) =>
    Effect.gen(function* () {
      const { sql } = yield* Nodes
      yield* sql`INSERT INTO devices (device_id, workspace_id, runtime_type, created_at_ms) VALUES (${`d-${turnId}`}, 'w', 'x', 0)`
      yield* sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms, device_id)
        VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0, ${`d-${turnId}`})`
      yield* sql`INSERT INTO turns (turn_id, session_id, run_id, status, input_json, input_cursor, attempt, created_at_ms, claimed_by)
        VALUES (${turnId}, ${`s-${turnId}`}, ${`run-${turnId}`}, 'queued', ${JSON.stringify(MessageInput.text("hi"))}, 0, 0, 0, 'node-b')`
      yield* sql`INSERT INTO core_nodes (node_id, node_url, expires_at_ms) VALUES ('node-b', 'http://node-b', ${aliveUntil})
        ON CONFLICT (node_id) DO UPDATE SET expires_at_ms = excluded.expires_at_ms`
    })

  it.live("routes the cancel to the live node that claimed the queued Turn; a dead claimer leaves device_offline", () =>
    Effect.gen(function* () {
      const { a, ran } = yield* Nodes
      yield* queuedOnB("t-1", Date.now() + 60_000)
      assert.deepStrictEqual(yield* a.cancel("t-1"), { status: "cancelled", delivery_id: null, abandoned: true })
      assert.deepStrictEqual(yield* Ref.get(ran), ["node-b:t-1"])

      yield* queuedOnB("t-2", 1)
      const refused = yield* Effect.flip(a.cancel("t-2"))
      assert.strictEqual((refused as OperatorConflict).reason, "device_offline")
      assert.deepStrictEqual(yield* Ref.get(ran), ["node-b:t-1"])
    }).pipe(Effect.provide(nodes)))
})
