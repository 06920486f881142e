/**
 * The workspace suite's memory verdict (bench/suites/workspaceMemory.ts) on passing and failing inputs: a
 * streamed export (a warm-up step, then flat) meets both targets, one that keeps a share of every chunk fails
 * the flat check, one that keeps everything fails both, and too few samples are never judged a pass.
 */
import { assert, describe, it } from "@effect/vitest"
import { figure } from "../../bench/lib/figures.js"
import { MiB, type RssSample, rssGrowth } from "../../bench/suites/workspaceMemory.js"

const total = 500 * MiB
const before = 200 * MiB

/** One sample per MiB of the export, RSS given by `rss(at)`. */
const samples = (rss: (at: number) => number): Array<RssSample> =>
  Array.from({ length: 501 }, (_, i) => ({ at: i * MiB, rss: rss(i * MiB) }))

/** Judged like the suite: growth < 100 MiB, second half < 16 MiB. */
const judged = (g: { growth: number; secondHalf: number }) => ({
  growth: figure({ suite: "workspace", name: "growth", unit: "MiB", samples: [g.growth / MiB], target: { on: "value", op: "<", value: 100 } }).meets,
  flat: figure({ suite: "workspace", name: "flat", unit: "MiB", samples: [g.secondHalf / MiB], target: { on: "value", op: "<", value: 16 } }).meets
})

describe("workspace bench memory verdict", () => {
  it("a streamed export that warms up by 40 MiB and then stays flat (with GC sawtooth) meets both targets", () => {
    const g = rssGrowth(before, samples((at) => before + Math.min(at, 40 * MiB) + ((at / MiB) % 7) * MiB), total)
    assert.strictEqual(Math.round(g.growth / MiB), 46)
    assert.isBelow(g.secondHalf, 1 * MiB)
    assert.deepStrictEqual(judged(g), { growth: true, flat: true })
  })

  it("an export that keeps a tenth of every chunk fails the flat check (and only just meets the growth bound)", () => {
    const g = rssGrowth(before, samples((at) => before + at / 10), total)
    assert.strictEqual(g.growth, 50 * MiB)
    assert.strictEqual(g.secondHalf, 25 * MiB)
    assert.deepStrictEqual(judged(g), { growth: true, flat: false })
  })

  it("an export that keeps every chunk fails both", () => {
    const g = rssGrowth(before, samples((at) => before + at), total)
    assert.strictEqual(g.growth, 500 * MiB)
    assert.strictEqual(g.secondHalf, 250 * MiB)
    assert.deepStrictEqual(judged(g), { growth: false, flat: false })
  })

  it("growth is measured from the RSS before the export, not from the first sample", () => {
    const g = rssGrowth(before, samples(() => before + 150 * MiB), total)
    assert.strictEqual(g.growth, 150 * MiB)
    assert.strictEqual(g.secondHalf, 0)
    assert.deepStrictEqual(judged(g), { growth: false, flat: true })
  })

  it("samples from one half only give NaN, which no target meets", () => {
    const g = rssGrowth(before, [{ at: 0, rss: before }, { at: MiB, rss: before }], total)
    assert.isNaN(g.growth)
    assert.isNaN(g.secondHalf)
    assert.deepStrictEqual(judged(g), { growth: false, flat: false })
  })
})
