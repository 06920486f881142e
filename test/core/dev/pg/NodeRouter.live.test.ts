/**
 * NodeRouter on a real PostgreSQL (own schema per test): a routed request is answered by the target node and
 * run once even when two claimers of the target race for it; a claimed request with no result within the
 * bound is unknown and is never replayed; a request no node takes is withdrawn (nothing ran); a request whose
 * NOTIFY was never sent is claimed by the target's poll. Live clock (real sockets and LISTEN connections);
 * nothing asserts a duration.
 */
import { assert, it } from "@effect/vitest"
import { Context, Deferred, type Duration, Effect, Layer, Redacted, Ref } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import { NodeRouter, type NodeRouterOptions } from "../../../../src/core/dev/pg/NodeRouter.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

class Nodes extends Context.Service<Nodes, {
  readonly a: NodeRouter["Service"]
  readonly b: NodeRouter["Service"]
  /** A second router with node b's id (its own pool and listener): races b for every claim. */
  readonly b2: NodeRouter["Service"]
  readonly sql: SqlClient.SqlClient
}>()("test/NodeRouter/Nodes") {}

describePostgres("NodeRouter on PostgreSQL", (url) => {
  const nodes = (timeout: Duration.Input) =>
    withSchema(url, (schema) =>
      Layer.effectContext(Effect.gen(function* () {
        const store = PgStore.sqlLayer({ url: Redacted.make(url), schema, maxConnections: 4 })
        const router = (options: NodeRouterOptions) =>
          Effect.map(
            Layer.build(NodeRouter.layer(options).pipe(Layer.provideMerge(store), Layer.provide(DevIds.layer))),
            (ctx) => ({ router: Context.get(ctx, NodeRouter), sql: Context.get(ctx, SqlClient.SqlClient) })
          )
        const a = yield* router({ nodeId: "node-a", timeout, pollInterval: "100 millis" })
        const b = yield* router({ nodeId: "node-b", timeout, pollInterval: "100 millis" })
        const b2 = yield* router({ nodeId: "node-b", timeout, pollInterval: "100 millis" })
        return Context.make(Nodes, { a: a.router, b: b.router, b2: b2.router, sql: a.sql })
      })))

  const rows = (sql: SqlClient.SqlClient) =>
    Effect.map(sql`SELECT request_id, state, result_json FROM node_requests ORDER BY created_at_ms, request_id`, (r) =>
      r.map((x) => ({ id: String(x.request_id), state: String(x.state), result: x.result_json === null ? null : String(x.result_json) })))

  it.live("answers a routed request from the target, running each request once though two claimers race", () =>
    Effect.gen(function* () {
      const { a, b, b2, sql } = yield* Nodes
      const runs = yield* Ref.make<ReadonlyArray<string>>([])
      const handler = (who: string) => (turnId: string | undefined, body: unknown) =>
        Effect.as(Ref.update(runs, (r) => [...r, `${who}:${turnId}`]), { echo: body, turn: turnId })
      yield* b.serve("echo", handler("b"))
      yield* b2.serve("echo", handler("b2"))
      const outcomes = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => a.request("node-b", "echo", `turn-${i}`, { n: i }),
        { concurrency: 20 }
      )
      assert.deepStrictEqual(
        outcomes,
        Array.from({ length: 20 }, (_, i) => ({ _tag: "Answered", result: { echo: { n: i }, turn: `turn-${i}` } }) as const)
      )
      const ran = (yield* Ref.get(runs)).map((r) => r.split(":")[1]!).sort()
      assert.deepStrictEqual(ran, Array.from({ length: 20 }, (_, i) => `turn-${i}`).sort())
      assert.isTrue((yield* rows(sql)).every((r) => r.state === "done"))
    }).pipe(Effect.provide(nodes("20 seconds"))))

  it.live("a claimed request without a result in the bound is unknown and never replayed; an unclaimed one is withdrawn", () =>
    Effect.gen(function* () {
      const { a, b, sql } = yield* Nodes
      const started = yield* Ref.make(0)
      const release = yield* Deferred.make<void>()
      yield* b.serve("slow", () => Effect.andThen(Ref.update(started, (n) => n + 1), Effect.as(Deferred.await(release), "late")))
      const slow = yield* a.request("node-b", "slow", "turn-1", {})
      assert.deepStrictEqual(slow, { _tag: "Unknown" })
      // Nobody serves node-c: the row is withdrawn, so no node can claim it later.
      assert.deepStrictEqual(yield* a.request("node-c", "slow", "turn-2", {}), { _tag: "Withdrawn" })
      // The target finishes late: its result is stored, but the request ran exactly once and is not run again.
      yield* Deferred.succeed(release, undefined)
      const settled = yield* Effect.gen(function* () {
        while (true) {
          const all = yield* rows(sql)
          if (all.some((r) => r.state === "done")) return all
          yield* Effect.sleep("50 millis")
        }
      })
      assert.deepStrictEqual(settled.map((r) => [r.state, r.result]), [["done", "\"late\""], ["withdrawn", null]])
      yield* Effect.sleep("300 millis") // several polls of node b
      assert.strictEqual(yield* Ref.get(started), 1)
    }).pipe(Effect.provide(nodes("1 second"))))

  it.live("claims a request whose NOTIFY never came, on its poll", () =>
    Effect.gen(function* () {
      const { b, sql } = yield* Nodes
      yield* b.serve("echo", (turnId) => Effect.succeed({ turn: turnId }))
      // A row inserted without NOTIFY (as if the notification was lost across a reconnect).
      yield* sql`INSERT INTO node_requests
          (request_id, target_node, requester_node, kind, turn_id, body_json, state, created_at_ms, expires_at_ms)
        VALUES ('req-silent', 'node-b', 'node-x', 'echo', 'turn-9', '{}', 'pending', ${Date.now()}, ${Date.now() + 60_000})`
      const done = yield* Effect.gen(function* () {
        while (true) {
          const all = yield* rows(sql)
          if (all[0]?.state === "done") return all[0]
          yield* Effect.sleep("50 millis")
        }
      })
      assert.deepStrictEqual(done, { id: "req-silent", state: "done", result: JSON.stringify({ turn: "turn-9" }) })
    }).pipe(Effect.provide(nodes("5 seconds"))))
})
