/**
 * NodeStreams on a real PostgreSQL (own schema per test), two nodes with their own pools and listeners: a stream
 * arrives whole and in order with at most the window of unread rows while the consumer is slow; a consumer that
 * ends early deletes the rows and the producer's body is interrupted; a producer that stops beating (its node
 * died) fails the consumer with `StreamLost` after the chunks it had written, and the rows are deleted. Live
 * clock (real sockets and LISTEN connections); nothing asserts a duration.
 */
import { assert, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Ref } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import { NodeRouter } from "../../../../src/core/dev/pg/NodeRouter.js"
import { NodeStreams } from "../../../../src/core/dev/pg/NodeStreams.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

interface Node {
  readonly router: NodeRouter["Service"]
  readonly streams: NodeStreams["Service"]
}
class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node; readonly sql: SqlClient.SqlClient }>()(
  "test/NodeStreams/Nodes"
) {}

const chunk = (i: number) => new Uint8Array(1000).fill(i % 251)

describePostgres("NodeStreams on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const store = PgStore.sqlLayer({ url: Redacted.make(url), schema, maxConnections: 4 })
      const node = (nodeId: string) =>
        Effect.map(
          Layer.build(
            NodeStreams.layer({ window: 2, beatInterval: "100 millis", staleAfter: "600 millis", pollInterval: "100 millis" }).pipe(
              Layer.provideMerge(NodeRouter.layer({ nodeId, timeout: "5 seconds", pollInterval: "100 millis" })),
              Layer.provideMerge(store),
              Layer.provide(DevIds.layer)
            )
          ),
          (ctx) => ({ node: { router: Context.get(ctx, NodeRouter), streams: Context.get(ctx, NodeStreams) }, sql: Context.get(ctx, SqlClient.SqlClient) })
        )
      const a = yield* node("node-a")
      const b = yield* node("node-b")
      return Context.make(Nodes, { a: a.node, b: b.node, sql: a.sql })
    })))

  const counts = (sql: SqlClient.SqlClient) =>
    Effect.map(
      sql`SELECT (SELECT count(*) FROM node_streams) AS streams, (SELECT count(*) FROM node_stream_chunks) AS chunks`,
      (r) => ({ streams: Number(r[0]!.streams), chunks: Number(r[0]!.chunks) })
    )

  /** Node b produces `n` chunks through `produce` (started by a routed request, as the export is). */
  const serveProducer = (b: Node, n: number, onStart: (fiber: Fiber.Fiber<void, unknown>) => Effect.Effect<void> = () => Effect.void) =>
    b.router.serve("produce", (_t, body) =>
      Effect.gen(function* () {
        const { stream_id, consumer } = body as { stream_id: string; consumer: string }
        const fiber = yield* Effect.forkDetach(
          b.streams.produce(stream_id, consumer, (write) =>
            Effect.as(Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => write(chunk(i)), { discard: true }), { total: n }))
        )
        yield* onStart(fiber)
        return { started: true }
      }))

  const start = (a: Node) => (streamId: string) => a.router.request("node-b", "produce", undefined, { stream_id: streamId, consumer: "node-a" })

  it.live("delivers every chunk in order with at most the window of unread rows, then deletes the rows", () =>
    Effect.gen(function* () {
      const { a, b, sql } = yield* Nodes
      yield* serveProducer(b, 40)
      const received = yield* Ref.make<Array<number>>([])
      const maxRows = yield* Ref.make(0)
      const result = yield* a.streams.consume("node-b", start(a), (bytes) =>
        Effect.gen(function* () {
          // A slow consumer: the producer runs ahead until the window is full.
          yield* Effect.sleep("20 millis")
          const c = yield* Effect.orDie(counts(sql))
          yield* Ref.update(maxRows, (m) => Math.max(m, c.chunks))
          yield* Ref.update(received, (r) => [...r, ...bytes])
        }))
      assert.deepStrictEqual(result.final, { total: 40 })
      const bytes = yield* Ref.get(received)
      const expected = Array.from({ length: 40 }, (_, i) => [...chunk(i)]).flat()
      assert.strictEqual(bytes.length, expected.length)
      assert.isTrue(bytes.every((v, i) => v === expected[i]))
      // The window (2 rows) plus the final row, never more; and at least one full window was seen.
      const most = yield* Ref.get(maxRows)
      assert.isAtMost(most, 3)
      assert.isAtLeast(most, 2)
      assert.deepStrictEqual(yield* counts(sql), { streams: 0, chunks: 0 })
    }).pipe(Effect.provide(nodes)), 30_000)

  it.live("a consumer that ends early deletes the rows and the producer's body is interrupted", () =>
    Effect.gen(function* () {
      const { a, b, sql } = yield* Nodes
      const producer = yield* Deferred.make<Fiber.Fiber<void, unknown>>()
      yield* serveProducer(b, 1_000_000, (fiber) => Effect.asVoid(Deferred.succeed(producer, fiber)))
      let n = 0
      const exit = yield* Effect.exit(a.streams.consume("node-b", start(a), () => (++n === 3 ? Effect.fail("client gone" as const) : Effect.void)))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(yield* counts(sql), { streams: 0, chunks: 0 })
      const producerExit = yield* Fiber.await(yield* Deferred.await(producer))
      assert.isTrue(Exit.isFailure(producerExit), "the producer stopped")
      assert.deepStrictEqual(yield* counts(sql), { streams: 0, chunks: 0 })
    }).pipe(Effect.provide(nodes)), 30_000)

  it.live("a producer that stops beating fails the consumer with StreamLost after what it wrote; the rows are deleted", () =>
    Effect.gen(function* () {
      const { a, b, sql } = yield* Nodes
      // The producer writes 3 chunks and then hangs; once they arrived its node "dies": the fiber is interrupted
      // (its beat stops with it), no final row.
      const allArrived = yield* Deferred.make<void>()
      yield* b.router.serve("produce", (_t, body) =>
        Effect.gen(function* () {
          const { stream_id, consumer } = body as { stream_id: string; consumer: string }
          const fiber = yield* Effect.forkDetach(
            b.streams.produce(stream_id, consumer, (write) =>
              Effect.andThen(Effect.forEach([0, 1, 2], (i) => write(chunk(i)), { discard: true }), Effect.never))
          )
          yield* Effect.forkDetach(Effect.andThen(Deferred.await(allArrived), Fiber.interrupt(fiber)))
          return { started: true }
        }))
      let received = 0
      const exit = yield* Effect.exit(a.streams.consume("node-b", start(a), (bytes) =>
        Effect.suspend(() => {
          received += bytes.length
          return received === 3000 ? Deferred.succeed(allArrived, undefined) : Effect.void
        })))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
      assert.strictEqual(error?._tag, "StreamLost")
      assert.strictEqual(received, 3000)
      assert.deepStrictEqual(yield* counts(sql), { streams: 0, chunks: 0 })
    }).pipe(Effect.provide(nodes)), 30_000)
})
