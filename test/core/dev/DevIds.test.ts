/**
 * The dev Core's production ids (issue 18, docs/store.md "Keys"): version-7 UUIDs whose first 48 bits are the
 * creation time, so ids drawn in later milliseconds sort after earlier ones (the store's index keys land on its
 * newest pages); credential rows keep random version-4 ids; every id is a canonical UUID the wire accepts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { DevIds, timeOrderedUuid } from "../../../src/core/dev/DevIds.js"
import { isCanonicalUuidString } from "../../../src/proto/Checks.js"

const versionOf = (uuid: string) => uuid[14]
const variantOf = (uuid: string) => uuid[19]
const millisOf = (uuid: string) => Number.parseInt(uuid.slice(0, 8) + uuid.slice(9, 13), 16)

describe("DevIds", () => {
  it("timeOrderedUuid: a canonical version-7 UUID carrying the given millisecond", () => {
    for (const ms of [0, 1, 1_796_393_265_617, 2 ** 48 - 1]) {
      const uuid = timeOrderedUuid(ms)
      assert.isTrue(isCanonicalUuidString(uuid), uuid)
      assert.strictEqual(uuid.length, 36)
      assert.strictEqual(versionOf(uuid), "7")
      assert.include(["8", "9", "a", "b"], variantOf(uuid))
      assert.strictEqual(millisOf(uuid), ms)
    }
  })

  it("timeOrderedUuid: ids of later milliseconds sort after earlier ones, as strings; the same millisecond differs", () => {
    const start = 1_796_393_265_617
    const ids = Array.from({ length: 200 }, (_, i) => timeOrderedUuid(start + Math.floor(i / 4)))
    for (let i = 4; i < ids.length; i++) assert.isTrue(ids[i - 4]! < ids[i]!, `${ids[i - 4]} < ${ids[i]}`)
    assert.strictEqual(new Set(ids).size, ids.length)
  })

  it.effect("layer: time-ordered ids for Turns, Sessions and Runs; random version-4 ids for credential rows", () =>
    Effect.gen(function*() {
      const ids = yield* DevIds
      const before = Date.now()
      const turn = yield* ids.next("turn")
      const session = yield* ids.next("session")
      const run = yield* ids.next("run")
      const credential = yield* ids.next("credential")
      const after = Date.now()
      for (const uuid of [turn, session, run.slice("run-".length)]) {
        assert.isTrue(isCanonicalUuidString(uuid), uuid)
        assert.strictEqual(versionOf(uuid), "7")
        assert.isTrue(millisOf(uuid) >= before && millisOf(uuid) <= after, uuid)
      }
      assert.isTrue(run.startsWith("run-"))
      assert.isTrue(isCanonicalUuidString(credential))
      assert.strictEqual(versionOf(credential), "4")
    }).pipe(Effect.provide(DevIds.layer)))
})
