/**
 * The turns suite's warm-up rule (bench/support/warmUp.ts): full unmeasured rounds until Core's CPU per Turn settles
 * (within the tolerance of the round before), at least `min` rounds, at most `max`; the note names every round.
 */
import { assert, describe, it } from "@effect/vitest"
import { warmedUp, warmUpNote } from "../../bench/support/warmUp.js"

const rule = { min: 3, max: 8, tolerance: 0.1 }

describe("warm-up rule", () => {
  it("runs at least `min` rounds even when the first ones agree (two cold rounds can)", () => {
    assert.isFalse(warmedUp(rule, []))
    assert.isFalse(warmedUp(rule, [6591]))
    assert.isFalse(warmedUp(rule, [6591, 6417]))
  })

  it("goes on while the figure is still falling and stops at the first round within the tolerance", () => {
    assert.isFalse(warmedUp(rule, [6852, 6121, 4209]))
    assert.isTrue(warmedUp(rule, [6852, 6121, 4209, 4113]))
    assert.isFalse(warmedUp(rule, [6852, 6121, 4209, 4800]), "a round 14 % above the one before is not settled")
  })

  it("stops at `max` rounds, settled or not", () => {
    assert.isFalse(warmedUp(rule, [9000, 7000, 5000, 3500, 4500, 3500, 4500]))
    assert.isTrue(warmedUp(rule, [9000, 7000, 5000, 3500, 4500, 3500, 4500, 3500]))
    assert.isTrue(warmedUp({ min: 1, max: 1, tolerance: 0.1 }, [14_800]))
  })

  it("names every warm-up round and how the warm-up ended", () => {
    assert.strictEqual(
      warmUpNote(rule, [6852, 6121, 4209, 4113], "µs"),
      "4 warm-up rounds (settled: the last within 10 % of the one before, at least 3, at most 8), 6852 → 6121 → 4209 → 4113 µs"
    )
    assert.include(warmUpNote(rule, [9000, 7000, 5000, 3500, 4500, 3500, 4500, 3500], "µs"), "8 warm-up rounds (not settled within 8)")
    assert.strictEqual(warmUpNote({ min: 1, max: 1, tolerance: 0.1 }, [14_800], "µs"), "1 warm-up round (a fixed round, not compared), 14.8k µs")
  })
})
