/**
 * Issue #22: the event-loop delay gauges (`Telemetry.eventLoopDelay`), on TestClock: nothing before the first
 * refresh window ends, then `<prefix>_event_loop_delay_seconds` with quantiles 0.5, 0.99 and 1 (max), in
 * seconds, refreshed each window. The values themselves are real event-loop measurements: only their shape is
 * asserted here (no timed assertion).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { eventLoopDelay } from "../../src/bin/Telemetry.js"
import { parsePrometheusText } from "../support/prometheusText.js"

const scrape = Effect.map(PrometheusMetrics.format(), parsePrometheusText)
const family = "agentwire_t_event_loop_delay_seconds"

describe("event-loop delay gauges", () => {
  it.effect("appear at the end of the first 5 s window with quantiles 0.5, 0.99 and 1, and refresh every window without growing", () =>
    Effect.gen(function* () {
      yield* Layer.build(eventLoopDelay("agentwire_t"))
      yield* TestClock.adjust("4999 millis")
      assert.isUndefined((yield* scrape).families.get(family))
      yield* TestClock.adjust("1 millis")
      const first = (yield* scrape).families.get(family)
      assert.strictEqual(first?.type, "gauge")
      assert.deepStrictEqual(first?.samples.map((s) => s.labels.quantile).sort(), ["0.5", "0.99", "1"])
      for (const sample of first?.samples ?? []) {
        assert.isTrue(Number.isFinite(sample.value) && sample.value >= 0 && sample.value < 60, `${sample.labels.quantile}=${sample.value}`)
      }
      // The next window replaces the values (still three series: one per quantile, no growth).
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* scrape).families.get(family)?.samples.length, 3)
    }).pipe(Effect.scoped, Effect.provideService(Metric.MetricRegistry, new Map())))
})
