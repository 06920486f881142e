/**
 * Owner leases on both store dialects: claims move the generation forward, renewals and fenced writes are
 * refused once a newer owner exists, and with two nodes on one PostgreSQL database a device that flaps
 * between them never has two owners whose writes are accepted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { type Lease, LeaseLost, OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

const nodeA = { nodeId: "node-a", nodeUrl: "http://127.0.0.1:7401", ttlMs: 15_000 }
const nodeB = { nodeId: "node-b", nodeUrl: "http://127.0.0.1:7402", ttlMs: 15_000 }

/** A write that leaves a trace: one row per accepted fenced write. */
const probe = (node: string, generation: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO write_reservations (reservation_id, session_id, operation_id, status, created_at_ms)
      VALUES (${`${node}-${generation}`}, ${"s1"}, ${node}, ${String(generation)}, 0)`)

const withSession = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
    VALUES ('s1', 'scripted', 'none', '{}', 0)`)

const accepted = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(sql`SELECT reservation_id FROM write_reservations ORDER BY created_at_ms, reservation_id`, (rows) =>
    rows.map((r) => String(r.reservation_id))))

const leaseCases = (sqlLayer: Layer.Layer<SqlClient.SqlClient, unknown>) => {
  const leases = OwnerLeases.layer(nodeA).pipe(Layer.provideMerge(sqlLayer))

  it.effect("claims generation 1, and a newer claim by another node takes it over with generation 2", () =>
    Effect.gen(function* () {
      const a = yield* OwnerLeases
      yield* TestClock.setTime(1_000)
      const first = yield* a.claim("dev-1")
      assert.deepStrictEqual(first, { deviceId: "dev-1", nodeId: "node-a", nodeUrl: nodeA.nodeUrl, generation: 1, expiresAtMs: 16_000 })
      const b = yield* Effect.provide(Effect.service(OwnerLeases), OwnerLeases.layer(nodeB))
      const second = yield* b.claim("dev-1")
      assert.deepStrictEqual([second.nodeId, second.generation], ["node-b", 2])
      assert.deepStrictEqual(yield* Effect.flip(a.renew(first)), new LeaseLost({ deviceId: "dev-1", generation: 1 }))
      yield* TestClock.setTime(5_000)
      assert.strictEqual((yield* b.renew(second)).expiresAtMs, 20_000)
      assert.deepStrictEqual(Option.map(yield* a.get("dev-1"), (l) => [l.nodeId, l.generation]), Option.some(["node-b", 2]))
    }).pipe(Effect.provide(leases)))

  it.effect("refuses a fenced write on an older generation and writes nothing; the current owner's commits", () =>
    Effect.gen(function* () {
      const a = yield* OwnerLeases
      yield* withSession
      const old = yield* a.claim("dev-1")
      const current = yield* a.claim("dev-1")
      assert.deepStrictEqual(
        yield* Effect.flip(a.fenced(old, probe("old", old.generation))),
        new LeaseLost({ deviceId: "dev-1", generation: 1 })
      )
      yield* a.fenced(current, probe("current", current.generation))
      assert.deepStrictEqual(yield* accepted, ["current-2"])
    }).pipe(Effect.provide(leases)))

  it.effect("rolls the fenced write back when it fails, keeping the lease", () =>
    Effect.gen(function* () {
      const a = yield* OwnerLeases
      yield* withSession
      const lease = yield* a.claim("dev-1")
      const failing = probe("x", 1).pipe(Effect.andThen(Effect.fail("boom" as const)))
      const exit: Exit.Exit<unknown, unknown> = yield* Effect.exit(a.fenced(lease, failing))
      assert.deepStrictEqual(exit, Exit.fail("boom"))
      assert.deepStrictEqual(yield* accepted, [])
      assert.strictEqual((yield* a.renew(lease)).generation, 1)
    }).pipe(Effect.provide(leases)))

  it.effect("a release expires only our own lease, and the next claim still moves the generation forward", () =>
    Effect.gen(function* () {
      const a = yield* OwnerLeases
      yield* TestClock.setTime(2_000)
      const first = yield* a.claim("dev-1")
      yield* a.release(first)
      assert.strictEqual(Option.getOrThrow(yield* a.get("dev-1")).expiresAtMs, 2_000)
      const second = yield* a.claim("dev-1")
      assert.strictEqual(second.generation, 2)
      yield* a.release(first) // stale: changes nothing
      assert.strictEqual(Option.getOrThrow(yield* a.get("dev-1")).expiresAtMs, 17_000)
    }).pipe(Effect.provide(leases)))
}

describe("OwnerLeases on SQLite", () => {
  leaseCases(Store.sqlLayer(":memory:"))
})

describePostgres("OwnerLeases on PostgreSQL", (url) => {
  const schemaLayer = (schema: string) => PgStore.sqlLayer({ url: Redacted.make(url), schema })
  leaseCases(withSchema(url, schemaLayer))

  /** Two nodes, each with its own pool, on one schema. */
  const twoNodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const nodeOf = (identity: typeof nodeA) =>
        Effect.flatMap(Layer.build(OwnerLeases.layer(identity).pipe(Layer.provideMerge(schemaLayer(schema)))), (ctx) =>
          Effect.succeed({ leases: Context.get(ctx, OwnerLeases), sql: Context.get(ctx, SqlClient.SqlClient) }))
      const a = yield* nodeOf(nodeA)
      const b = yield* nodeOf(nodeB)
      return Context.make(TwoNodes, { a, b })
    })))

  it.effect("a claim by another node waits for an in-flight fenced write, which then commits; the old owner's next write is refused", () =>
    Effect.gen(function* () {
      const { a, b } = yield* TwoNodes
      yield* Effect.provideService(withSession, SqlClient.SqlClient, a.sql)
      const leaseA = yield* a.leases.claim("dev-1")
      const inside = yield* Deferred.make<void>()
      const proceed = yield* Deferred.make<void>()
      const write = yield* Effect.forkChild(a.leases.fenced(
        leaseA,
        probe("a", 1).pipe(Effect.andThen(Deferred.succeed(inside, undefined)), Effect.andThen(Deferred.await(proceed)))
      ).pipe(Effect.provideService(SqlClient.SqlClient, a.sql)))
      yield* Deferred.await(inside)
      const claimB = yield* Effect.forkChild(b.leases.claim("dev-1"))
      // B's claim needs the row A's open transaction holds: it cannot finish before A commits.
      yield* TestClock.withLive(Effect.sleep("300 millis"))
      assert.isUndefined(claimB.pollUnsafe())
      yield* Deferred.succeed(proceed, undefined)
      yield* Fiber.join(write)
      const leaseB = yield* Fiber.join(claimB)
      assert.strictEqual(leaseB.generation, 2)
      assert.deepStrictEqual(
        yield* Effect.flip(a.leases.fenced(leaseA, probe("a", 99)).pipe(Effect.provideService(SqlClient.SqlClient, a.sql))),
        new LeaseLost({ deviceId: "dev-1", generation: 1 })
      )
      assert.deepStrictEqual(yield* Effect.provideService(accepted, SqlClient.SqlClient, b.sql), ["a-1"])
    }).pipe(Effect.provide(twoNodes)))

  it.effect("a device flapping between two nodes never has two owners accepted for writes", () =>
    Effect.gen(function* () {
      const { a, b } = yield* TwoNodes
      yield* Effect.provideService(withSession, SqlClient.SqlClient, a.sql)
      const nodes = { a, b }
      const held: Record<"a" | "b", Lease | undefined> = { a: undefined, b: undefined }
      const expected: Array<string> = []
      for (let round = 0; round < 20; round++) {
        const claimer = round % 2 === 0 ? "a" : "b"
        held[claimer] = yield* nodes[claimer].leases.claim("dev-1")
        // Both nodes try to write concurrently with what they believe they hold.
        const results = yield* Effect.all(
          (["a", "b"] as const).map((name) => {
            const lease = held[name]
            if (lease === undefined) return Effect.succeed(false)
            return nodes[name].leases.fenced(lease, probe(`${name}${round}`, lease.generation)).pipe(
              Effect.provideService(SqlClient.SqlClient, nodes[name].sql),
              Effect.as(true),
              Effect.catchTag("LeaseLost", () => Effect.succeed(false))
            )
          }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(results, [claimer === "a", claimer === "b"], `round ${round}`)
        expected.push(`${claimer}${round}-${round + 1}`)
      }
      const rows = yield* Effect.provideService(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT reservation_id, status FROM write_reservations`),
        SqlClient.SqlClient,
        a.sql
      )
      // exactly one accepted write per generation, by the node that claimed it
      assert.deepStrictEqual(rows.map((r) => String(r.reservation_id)).sort(), [...expected].sort())
      assert.deepStrictEqual(rows.map((r) => Number(r.status)).sort((x, y) => x - y), expected.map((_, i) => i + 1))
    }).pipe(Effect.provide(twoNodes)))
})

class TwoNodes extends Context.Service<TwoNodes, {
  readonly a: { readonly leases: OwnerLeases["Service"]; readonly sql: SqlClient.SqlClient }
  readonly b: { readonly leases: OwnerLeases["Service"]; readonly sql: SqlClient.SqlClient }
}>()("test/TwoNodes") {}
