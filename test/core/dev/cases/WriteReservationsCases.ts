/**
 * Durable write reservation tests shared by every store dialect (docs/store.md): what blocks a Session's next
 * write, an operator's settlement of an unknown row, and the start-up reconciliation, alone and with owner
 * leases (several nodes on one database: a row of a device another live node owns is left alone).
 */
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import type * as Store from "../../../../src/core/dev/Store.js"
import * as WriteReservations from "../../../../src/core/dev/WriteReservations.js"

const device = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO devices (device_id, workspace_id, runtime_type, created_at_ms) VALUES (${id}, 'w', 'agent-daemon', 0)`)

const session = (id: string, deviceId?: string) =>
  Effect.flatMap(SessionStore, (s) => s.create({ sessionId: id, agentKind: "scripted", environmentType: "none", configuration: {}, deviceId }))

/** A reservation of a new Session (on `deviceId`), moved to `status`. */
const left = (i: number | string, status: WriteReservations.ReservationStatus, deviceId?: string) =>
  Effect.gen(function* () {
    const w = yield* WriteReservations.WriteReservations
    yield* session(`s-${i}`, deviceId)
    yield* w.reserve({ reservationId: `w-${i}`, sessionId: `s-${i}`, sha256: "b".repeat(64), sizeBytes: 1 })
    if (status !== "reserved") yield* w.mark(`w-${i}`, status)
  })

const statusOf = (id: string) =>
  Effect.flatMap(WriteReservations.WriteReservations, (w) => Effect.map(w.get(id), (r) => Option.getOrThrow(r).status))

export const writeReservationCases = (store: Layer.Layer<Store.StoreServices | SqlClient.SqlClient, unknown>) => {
  const layer = WriteReservations.layer.pipe(Layer.provideMerge(store))
  // One store under both: node A's leases beside the reservations.
  const withLeases = Layer.mergeAll(WriteReservations.layer, OwnerLeases.layer({ nodeId: "node-a", nodeUrl: "http://a", ttlMs: 15_000 })).pipe(
    Layer.provideMerge(store)
  )

  it.effect("an unsettled reservation blocks its Session only; an exact settlement releases it", () =>
    Effect.gen(function* () {
      const w = yield* WriteReservations.WriteReservations
      yield* session("s-1")
      yield* session("s-2")
      assert.isTrue(Option.isNone(yield* w.unsettled("s-1")))
      yield* w.reserve({ reservationId: "w-1", sessionId: "s-1", sha256: "a".repeat(64), sizeBytes: 3 })
      assert.strictEqual(Option.getOrThrow(yield* w.unsettled("s-1")).reservationId, "w-1")
      assert.isTrue(Option.isNone(yield* w.unsettled("s-2")))
      for (const status of ["dispatched", "committing", "unknown"] as const) {
        yield* w.mark("w-1", status)
        assert.isTrue(Option.isSome(yield* w.unsettled("s-1")), status)
      }
      yield* w.mark("w-1", "completed")
      assert.isTrue(Option.isNone(yield* w.unsettled("s-1")))
      const row = Option.getOrThrow(yield* w.get("w-1"))
      assert.deepStrictEqual([row.status, row.settledAtMs !== undefined, row.sizeBytes, row.operationId], ["completed", true, 3, "w-1"])
    }).pipe(Effect.provide(layer)))

  it.effect("start-up reconciliation: no commit sent → failed; commit possibly sent → unknown (still blocking)", () =>
    Effect.gen(function* () {
      const w = yield* WriteReservations.WriteReservations
      const statuses = ["reserved", "dispatched", "committing", "completed", "rejected", "unknown"] as const
      for (const [i, status] of statuses.entries()) yield* left(i, status)
      assert.strictEqual(yield* w.recover, 3)
      const after = []
      for (const i of statuses.keys()) after.push(yield* statusOf(`w-${i}`))
      assert.deepStrictEqual(after, ["failed", "failed", "unknown", "completed", "rejected", "unknown"])
      assert.isTrue(Option.isSome(yield* w.unsettled("s-2")))
      assert.isTrue(Option.isNone(yield* w.unsettled("s-0")))
      assert.strictEqual(yield* w.recover, 0)
    }).pipe(Effect.provide(layer)))

  it.effect("an operator settles only an unknown row, once; the Session is unblocked", () =>
    Effect.gen(function* () {
      const w = yield* WriteReservations.WriteReservations
      yield* left("u", "unknown")
      yield* left("c", "committing")
      yield* left("d", "completed")
      yield* TestClock.setTime(42_000)
      assert.isFalse(yield* w.settleUnknown("w-c", "failed"), "a commit in flight is not the operator's")
      assert.isFalse(yield* w.settleUnknown("w-d", "failed"), "a settled row stays as it is")
      assert.isFalse(yield* w.settleUnknown("w-none", "failed"))
      assert.deepStrictEqual([yield* statusOf("w-c"), yield* statusOf("w-d")], ["committing", "completed"])
      assert.isTrue(yield* w.settleUnknown("w-u", "completed"))
      const row = Option.getOrThrow(yield* w.get("w-u"))
      assert.deepStrictEqual([row.status, row.settledAtMs], ["completed", 42_000])
      assert.isTrue(Option.isNone(yield* w.unsettled("s-u")))
      assert.isFalse(yield* w.settleUnknown("w-u", "failed"), "settled once")
    }).pipe(Effect.provide(layer)))

  it.effect("with owner leases: a row of a device another live node owns is left alone; expired, ours or none are reconciled", () =>
    Effect.gen(function* () {
      const w = yield* WriteReservations.WriteReservations
      const a = yield* OwnerLeases
      const b = yield* Effect.provide(Effect.service(OwnerLeases), OwnerLeases.layer({ nodeId: "node-b", nodeUrl: "http://b", ttlMs: 15_000 }))
      yield* TestClock.setTime(1_000)
      for (const d of ["dev-live-b", "dev-expired-b", "dev-ours", "dev-no-lease"]) yield* device(d)
      yield* b.claim("dev-expired-b") // expires at 16 s
      yield* TestClock.setTime(20_000)
      yield* b.claim("dev-live-b") // live until 35 s
      yield* a.claim("dev-ours")
      yield* left("live-b", "committing", "dev-live-b")
      yield* left("live-b-2", "dispatched", "dev-live-b")
      yield* left("expired-b", "committing", "dev-expired-b")
      yield* left("ours", "dispatched", "dev-ours")
      yield* left("no-lease", "reserved", "dev-no-lease")
      yield* left("no-device", "committing")
      assert.strictEqual(yield* w.recover, 4)
      const after: Record<string, string> = {}
      for (const k of ["live-b", "live-b-2", "expired-b", "ours", "no-lease", "no-device"]) after[k] = yield* statusOf(`w-${k}`)
      assert.deepStrictEqual(after, {
        "live-b": "committing",
        "live-b-2": "dispatched",
        "expired-b": "unknown",
        ours: "failed",
        "no-lease": "failed",
        "no-device": "unknown"
      })
      // Once node B's lease expired, the next start reconciles its rows too.
      yield* TestClock.setTime(35_001)
      assert.strictEqual(yield* w.recover, 2)
      assert.deepStrictEqual([yield* statusOf("w-live-b"), yield* statusOf("w-live-b-2")], ["unknown", "failed"])
    }).pipe(Effect.provide(withLeases)))
}
