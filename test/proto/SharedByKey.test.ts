/** The bounded shared table behind heartbeat templates and kinds maps (src/proto/SharedByKey.ts). */
import { assert, describe, it } from "@effect/vitest"
import { SharedByKey } from "../../src/proto/index.js"

describe("SharedByKey", () => {
  it("shares a value under its key until the table starts over at its entry bound", () => {
    const table = SharedByKey.make<{ readonly n: number }>(3, 1000)
    const first = table.add("a", { n: 1 })
    assert.strictEqual(table.get("a"), first)
    table.add("b", { n: 2 })
    table.add("c", { n: 3 })
    assert.strictEqual(table.get("a"), first)
    // A fourth key starts over: only it is shared afterwards.
    const fourth = table.add("d", { n: 4 })
    assert.isUndefined(table.get("a"))
    assert.isUndefined(table.get("c"))
    assert.strictEqual(table.get("d"), fourth)
  })

  it("starts over when the keys' total length would pass its character bound", () => {
    const table = SharedByKey.make<number>(100, 10)
    table.add("x".repeat(6), 1)
    table.add("y".repeat(4), 2)
    assert.strictEqual(table.get("x".repeat(6)), 1)
    table.add("z", 3)
    assert.isUndefined(table.get("x".repeat(6)))
    assert.strictEqual(table.get("z"), 3)
  })
})
