/**
 * Journal followers fed from PostgreSQL (docs/multi-node.md "SSE on every node"), two nodes with their own
 * pools and listeners on one schema: a follower on node B receives node A's stored entries once and in seq
 * order, node A's notices of that Turn in order with them (none of another Turn's), and the outcome last. A
 * notice over NOTIFY's payload bound is not sent and breaks nothing. Live clock (LISTEN connections); nothing
 * asserts a duration.
 */
import { assert, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Redacted, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import type { JournalItem } from "../../../../src/core/dev/JournalItem.js"
import { JournalFeed } from "../../../../src/core/dev/pg/JournalFeed.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

interface Node {
  readonly feed: JournalFeed["Service"]
  readonly turns: TurnStore["Service"]
  readonly sql: SqlClient.SqlClient
}
class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node }>()("test/JournalFeed/Nodes") {}

describePostgres("JournalFeed on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const node = Effect.map(
        Layer.build(
          JournalFeed.layer({ pollInterval: "5 seconds" }).pipe(
            Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema, maxConnections: 3 }))),
            Layer.provide(DevIds.layerTest)
          )
        ),
        (ctx): Node => ({ feed: Context.get(ctx, JournalFeed), turns: Context.get(ctx, TurnStore), sql: Context.get(ctx, SqlClient.SqlClient) })
      )
      const a = yield* node
      const b = yield* node
      return Context.make(Nodes, { a, b })
    })))

  const turnOf = (n: Node, turnId: string) =>
    Effect.gen(function* () {
      yield* n.sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
        VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0)`
      yield* n.turns.create({ turnId, sessionId: `s-${turnId}`, runId: `run-${turnId}`, input: { text: "x" } as any })
    })

  const append = (n: Node, turnId: string, seq: number) =>
    Effect.andThen(
      n.turns.appendEvents(turnId, [{ seq, attempt: 1, kind: "fact", type: "Dispatching", bodyJson: `{"n":${seq}}` }]),
      n.feed.appended(turnId)
    )

  const shape = (item: JournalItem): string =>
    item._tag === "entry" ? `entry ${item.seq}` : item._tag === "notice" ? `notice ${item.event} ${JSON.stringify(item.data)}` : `outcome ${item.turn.status}`

  it.live("passes on the running node's entries and notices of the Turn in order, then the outcome", () =>
    Effect.gen(function* () {
      const { a, b } = yield* Nodes
      yield* turnOf(a, "t1")
      yield* turnOf(a, "t2")
      yield* append(a, "t1", 1)
      const seen: Array<string> = []
      const follower = yield* b.feed.follow("t1", 0).pipe(
        Stream.runForEach((item) => Effect.sync(() => seen.push(shape(item)))),
        Effect.forkChild
      )
      const waitFor = (n: number) =>
        Effect.gen(function* () {
          while (seen.length < n) yield* Effect.sleep("20 millis")
        }).pipe(Effect.timeout("10 seconds"))
      yield* waitFor(1)
      yield* a.feed.noticed("t1", "input", { input_id: "i1", status: "written" })
      yield* a.feed.noticed("t2", "input", { input_id: "other", status: "written" })
      yield* a.feed.noticed("t1", "interaction", { kind: "permission", interaction_id: "p1", status: "pending", big: "x".repeat(10_000) })
      yield* waitFor(2)
      yield* append(a, "t1", 2)
      yield* a.feed.noticed("t1", "input", { input_id: "i1", status: "accepted", position: 1 })
      yield* waitFor(4)
      yield* a.turns.complete("t1", { status: "completed" } as any)
      yield* a.feed.appended("t1")
      yield* Fiber.join(follower).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(seen, [
        "entry 1",
        `notice input {"input_id":"i1","status":"written"}`,
        "entry 2",
        `notice input {"input_id":"i1","status":"accepted","position":1}`,
        "outcome completed"
      ])
    }).pipe(Effect.provide(nodes)), 30_000)
})
