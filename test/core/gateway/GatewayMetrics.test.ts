/**
 * Issue #22 on Core's side, in memory: the gateway counts connections (open gauge, accepted / closed events),
 * heartbeats, frames and bytes each way and every inbound decode failure by its invalid-frame code, in the
 * metric registry it was built in; `/metrics` serves that registry (test/e2e/observability.live.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { Messages } from "../../../src/proto/index.js"
import { connectMemory, device, heartbeat, kind, runId } from "../../support/coreScriptedRuntime.js"
import { parsePrometheusText, sumOf, valueOf } from "../../support/prometheusText.js"
import { gatewayLayer, settle } from "./helpers.js"

const scrape = Effect.map(PrometheusMetrics.format(), parsePrometheusText)

describe("Gateway metrics", () => {
  it.effect("count connections, heartbeats, frames and bytes each way, and decode failures by reason", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const opened = yield* scrape
      assert.strictEqual(valueOf(opened, "agentwire_core_connections", { state: "open" }), 1)
      assert.strictEqual(sumOf(opened, "agentwire_core_connection_events_total", { event: "accepted" }), 1)
      assert.strictEqual(sumOf(opened, "agentwire_core_decode_failures_total"), 0)

      yield* connection.runtime.send(heartbeat([kind("codex")]))
      yield* connection.runtime.sendRaw("not json")
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "bogus", id: "x", payload: {} }))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "delta", payload: { delta: "x", sequence: 1 } }))
      yield* settle(connection) // one more frame in: the barrier's done
      const cancel: Messages.CoreToRuntime = { type: "prompt_cancel", id: runId("run-1"), payload: {} }
      yield* connection.session.send(cancel)
      const sent = yield* connection.runtime.receive
      assert.deepStrictEqual(sent, cancel)

      const after = yield* scrape
      const framesIn = (e: typeof after) => sumOf(e, "agentwire_core_frames_total", { direction: "in" })
      assert.strictEqual(sumOf(after, "agentwire_core_heartbeats_total") - sumOf(opened, "agentwire_core_heartbeats_total"), 1)
      const failures = (reason: string) => sumOf(after, "agentwire_core_decode_failures_total", { reason })
      assert.strictEqual(failures("not_json"), 1)
      assert.strictEqual(failures("unknown_type"), 1)
      assert.strictEqual(failures("missing_id"), 1)
      assert.strictEqual(sumOf(after, "agentwire_core_decode_failures_total"), 3)
      assert.strictEqual(framesIn(after) - framesIn(opened), 5)
      assert.isAbove(sumOf(after, "agentwire_core_frame_bytes_total", { direction: "in" }), 100)
      assert.strictEqual(sumOf(after, "agentwire_core_frames_total", { direction: "out" }), 1)
      assert.strictEqual(sumOf(after, "agentwire_core_frame_bytes_total", { direction: "out" }), JSON.stringify(sent).length)

      // A frame over 4 MiB is refused unread (the connection ends with 1009) and counted as a decode failure.
      yield* connection.runtime.sendRaw("x".repeat(5 * 1024 * 1024))
      yield* Fiber.await(connection.accepted)
      const closed = yield* scrape
      assert.strictEqual(sumOf(closed, "agentwire_core_decode_failures_total", { reason: "frame_too_large" }), 1)
      assert.strictEqual(framesIn(closed) - framesIn(opened), 5)
      assert.strictEqual(valueOf(closed, "agentwire_core_connections", { state: "open" }), 0)
      assert.strictEqual(sumOf(closed, "agentwire_core_connection_events_total", { event: "closed" }), 1)
    }).pipe(Effect.provide(gatewayLayer()), Effect.provideService(Metric.MetricRegistry, new Map())))
})
