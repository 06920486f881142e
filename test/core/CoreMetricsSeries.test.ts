/**
 * `CoreMetrics.series` (issue 18, tspan): a Turn's metric updates with attributes (an admission's outcome and
 * code, a finished Run's status, receipts, cancels, decode failures) use one counter per attribute set, built
 * once and reused, instead of `Metric.withAttributes` per update (a context add and a series key recomputed
 * each time). It is the same registry series `Metric.withAttributes` updates, so `/metrics` is unchanged.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import * as CoreMetrics from "../../src/core/CoreMetrics.js"

describe("CoreMetrics.series", () => {
  it("is one counter per attribute set, reused", () => {
    const counter = Metric.counter("test_core_metrics_series_total", { incremental: true })
    const a = CoreMetrics.series(counter, { outcome: "ready", code: "none" })
    assert.strictEqual(CoreMetrics.series(counter, { outcome: "ready", code: "none" }), a)
    assert.notStrictEqual(CoreMetrics.series(counter, { outcome: "failed", code: "none" }), a)
    assert.notStrictEqual(CoreMetrics.series(counter, { outcome: "ready", code: "x" }), a)
  })

  it.effect("updates the series Metric.withAttributes updates (one series, both updates counted)", () =>
    Effect.gen(function* () {
      const counter = Metric.counter("test_core_metrics_same_series_total", { description: "d", incremental: true })
      yield* Metric.update(CoreMetrics.series(counter, { status: "completed" }), 1)
      yield* Metric.update(Metric.withAttributes(counter, { status: "completed" }), 2)
      yield* Metric.update(CoreMetrics.series(counter, { status: "failed" }), 5)
      const snapshots = (yield* Metric.snapshot).filter((s) => s.id === "test_core_metrics_same_series_total")
      assert.strictEqual(snapshots.length, 2)
      const completed = snapshots.find((s) => s.attributes?.["status"] === "completed")!
      assert.strictEqual((completed.state as Metric.CounterState<number>).count, 3)
      assert.strictEqual(completed.description, "d")
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))
})
