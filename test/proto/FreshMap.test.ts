/**
 * FreshMap (src/proto/FreshMap.ts): a Map for long-lived owners that moves its entries to a new Map after every
 * `deletesPerCopy` deletes. It answers as a Map does, keeps insertion order across copies, and makes no copy while
 * an iteration is open, so what is set during a `for…of` is still met by it.
 */
import { assert, describe, it } from "@effect/vitest"
import { FreshMap } from "../../src/proto/FreshMap.js"

/** The Map a FreshMap holds now (private; read here to prove a copy happened, or did not). */
const backing = (map: FreshMap<string, number>): Map<string, number> => (map as unknown as { map: Map<string, number> }).map

describe("FreshMap", () => {
  it("answers get, has, set, delete and size as a Map; deleting a missing key is false and counts nothing", () => {
    const map = new FreshMap<string, number>(2)
    assert.strictEqual(map.set("a", 1), map)
    map.set("b", 2)
    assert.strictEqual(map.get("a"), 1)
    assert.isTrue(map.has("b"))
    assert.strictEqual(map.size, 2)
    const before = backing(map)
    assert.isFalse(map.delete("missing"))
    assert.isFalse(map.delete("missing"))
    assert.strictEqual(backing(map), before)
    assert.isTrue(map.delete("a"))
    assert.isUndefined(map.get("a"))
    assert.isFalse(map.has("a"))
    assert.strictEqual(map.size, 1)
    map.clear()
    assert.strictEqual(map.size, 0)
  })

  it("moves its entries to a new Map after every deletesPerCopy deletes, in the same order", () => {
    const map = new FreshMap<string, number>(3)
    for (let i = 0; i < 10; i++) map.set(`k${i}`, i)
    const first = backing(map)
    map.delete("k0")
    map.delete("k5")
    assert.strictEqual(backing(map), first)
    map.delete("k9")
    const second = backing(map)
    assert.notStrictEqual(second, first)
    assert.deepStrictEqual([...map.keys()], ["k1", "k2", "k3", "k4", "k6", "k7", "k8"])
    assert.deepStrictEqual([...map.values()], [1, 2, 3, 4, 6, 7, 8])
    assert.deepStrictEqual([...map].map(([k]) => k), [...map.entries()].map(([k]) => k))
    map.delete("k1")
    map.delete("k2")
    assert.strictEqual(backing(map), second)
    map.delete("k3")
    assert.notStrictEqual(backing(map), second)
    assert.deepStrictEqual([...map.keys()], ["k4", "k6", "k7", "k8"])
  })

  it("makes no copy while a for…of is open: an entry set again during it is met by it, as in a Map", () => {
    const map = new FreshMap<string, number>(2)
    map.set("stays", -1)
    for (let i = 0; i < 6; i++) map.set(`k${i}`, i)
    const before = backing(map)
    const seen: Array<string> = []
    for (const [key, value] of map) {
      seen.push(key)
      if (value < 0) continue
      map.delete(key)
      if (value < 6) map.set(`again-${key}`, value + 6)
    }
    // Twelve deletes counted, yet no copy was made during the loop, and the loop met what it set.
    assert.strictEqual(backing(map), before)
    assert.deepStrictEqual(seen, [
      "stays", "k0", "k1", "k2", "k3", "k4", "k5",
      "again-k0", "again-k1", "again-k2", "again-k3", "again-k4", "again-k5"
    ])
    // The iteration closed: the next delete copies.
    map.set("x", 1)
    map.delete("x")
    assert.notStrictEqual(backing(map), before)
    assert.deepStrictEqual([...map.keys()], ["stays"])
  })

  it("closes an iteration left by break", () => {
    const map = new FreshMap<string, number>(1)
    map.set("a", 1).set("b", 2)
    const before = backing(map)
    for (const _ of map.keys()) break
    map.delete("a")
    assert.notStrictEqual(backing(map), before)
  })

  it("closes an iteration left by a throw", () => {
    const map = new FreshMap<string, number>(1)
    map.set("a", 1).set("b", 2)
    const before = backing(map)
    assert.throws(() => {
      for (const _ of map.values()) throw new Error("stop")
    })
    map.delete("a")
    assert.notStrictEqual(backing(map), before)
  })
})
