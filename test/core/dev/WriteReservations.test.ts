/**
 * Durable write reservations on the SQLite store: what blocks a Session's next write, and the start-up
 * reconciliation (a reservation whose commit was never sent settles failed; one whose commit may have left
 * becomes unknown and keeps blocking; settled rows are untouched).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import * as WriteReservations from "../../../src/core/dev/WriteReservations.js"

const layer = WriteReservations.layer.pipe(Layer.provideMerge(Store.layerFile(":memory:")), Layer.provide(DevIds.layerTest))

const session = (id: string) =>
  Effect.flatMap(SessionStore, (s) => s.create({ sessionId: id, agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined }))

describe("WriteReservations", () => {
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
      for (const [i, status] of statuses.entries()) {
        yield* session(`s-${i}`)
        yield* w.reserve({ reservationId: `w-${i}`, sessionId: `s-${i}`, sha256: "b".repeat(64), sizeBytes: 1 })
        if (status !== "reserved") yield* w.mark(`w-${i}`, status)
      }
      assert.strictEqual(yield* w.recover, 3)
      const after = []
      for (const i of statuses.keys()) after.push(Option.getOrThrow(yield* w.get(`w-${i}`)).status)
      assert.deepStrictEqual(after, ["failed", "failed", "unknown", "completed", "rejected", "unknown"])
      assert.isTrue(Option.isSome(yield* w.unsettled("s-2")))
      assert.isTrue(Option.isNone(yield* w.unsettled("s-0")))
      assert.strictEqual(yield* w.recover, 0)
    }).pipe(Effect.provide(layer)))
})
