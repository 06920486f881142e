/**
 * Issue #22: what `src/bin/Telemetry.ts` builds from the `OTEL_*` variables, posted to the loopback OTLP/HTTP
 * receiver (test/support/otlpReceiver.ts): `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` reach the
 * exported resource, the default service name applies otherwise, the default protocol is `http/protobuf`, and
 * without an endpoint nothing is built: Effect's own tracer stays in place and no request is made.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Metric } from "effect"
import * as Telemetry from "../../src/bin/Telemetry.js"
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlpReceiver.js"

let receiver: OtlpReceiver
beforeAll(async () => {
  receiver = await startOtlpReceiver()
})
afterAll(async () => {
  await receiver?.close()
})

/** Builds the telemetry layer from `env`, runs one span named `name` under it, and closes it (which flushes). */
const exportOneSpan = (env: Record<string, string>, name: string) =>
  Effect.gen(function* () {
    const layer = yield* Telemetry.fromEnv("agentwire-test")
    return yield* Effect.withSpan(Effect.map(Effect.tracer, (t) => t), name).pipe(Effect.provide(layer))
  }).pipe(Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })))

const spanNamed = (name: string) => receiver.spans().filter((s) => s.name === name)

describe("Telemetry export (loopback OTLP receiver)", () => {
  it.effect("OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES reach the exported resource", () =>
    Effect.gen(function* () {
      yield* exportOneSpan({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_SERVICE_NAME: "agentwire-core-eu-1",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.namespace=agents%2Cteam"
      }, "probe-named")
      const [span] = spanNamed("probe-named")
      assert.isDefined(span)
      assert.strictEqual(span!.service, "agentwire-core-eu-1")
      assert.strictEqual(span!.resource["deployment.environment"], "prod")
      assert.strictEqual(span!.resource["service.namespace"], "agents,team")
      assert.isString(span!.resource["service.version"])
    }))

  it.effect("a service.name in OTEL_RESOURCE_ATTRIBUTES wins over the default; without either the default applies", () =>
    Effect.gen(function* () {
      const base = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_METRICS_EXPORTER: "none" }
      yield* exportOneSpan({ ...base, OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attributes" }, "probe-attr")
      yield* exportOneSpan(base, "probe-default")
      assert.strictEqual(spanNamed("probe-attr")[0]?.service, "from-attributes")
      assert.strictEqual(spanNamed("probe-default")[0]?.service, "agentwire-test")
    }))

  it.effect("the default protocol posts protobuf (the receiver, JSON-only, refuses it)", () =>
    Effect.gen(function* () {
      const rejected = receiver.rejected()
      const posted = receiver.bodies.traces.length
      yield* exportOneSpan({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_METRICS_EXPORTER: "none" }, "probe-protobuf")
      assert.strictEqual(receiver.rejected(), rejected + 1) // 415: application/x-protobuf
      assert.strictEqual(receiver.bodies.traces.length, posted)
    }))

  it.effect("without an endpoint: Effect's own tracer, no exporter, no request, metrics only in the local registry", () =>
    Effect.gen(function* () {
      const before = { traces: receiver.bodies.traces.length, metrics: receiver.bodies.metrics.length, rejected: receiver.rejected() }
      const native = yield* Effect.tracer
      const counter = Metric.counter("agentwire_test_probe_total", { incremental: true })
      const used = yield* exportOneSpan({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }, "probe-off").pipe(
        Effect.tap(() => Metric.update(counter, 1))
      )
      assert.strictEqual(used, native)
      const disabled = yield* exportOneSpan({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: "true" }, "probe-disabled")
      assert.strictEqual(disabled, native)
      assert.deepStrictEqual(
        { traces: receiver.bodies.traces.length, metrics: receiver.bodies.metrics.length, rejected: receiver.rejected() },
        before
      )
      // With an endpoint, the tracer is replaced (the contrast that makes the assertion above meaningful).
      const exporting = yield* exportOneSpan(
        { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_METRICS_EXPORTER: "none" },
        "probe-on"
      )
      assert.notStrictEqual(exporting, native)
    }))
})
