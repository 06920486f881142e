/**
 * Issue #22: the `OTEL_*` settings (src/bin/Telemetry.ts), the `--metrics-listen` address, and the strict
 * Prometheus text parser the end-to-end test relies on (test/support/prometheusText.ts) against Effect's real
 * formatter output and against malformed text.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { parseListen } from "../../src/bin/MetricsListener.js"
import { parseKeyValues, settingsFromEnv } from "../../src/bin/Telemetry.js"
import { parsePrometheusText, sumOf, valueOf } from "../support/prometheusText.js"

const withEnv = (env: Record<string, string>) =>
  settingsFromEnv("agentwire-test").pipe(Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })))

describe("Telemetry settings", () => {
  it.effect("exports nothing without an endpoint, or when disabled", () =>
    Effect.gen(function* () {
      assert.isUndefined(yield* withEnv({}))
      assert.isUndefined(yield* withEnv({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }))
      assert.isUndefined(yield* withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SDK_DISABLED: "true" }))
      assert.isUndefined(yield* withEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_TRACES_EXPORTER: "none",
        OTEL_METRICS_EXPORTER: "none"
      }))
    }))

  it.effect("derives the signal URLs, the protocol, the default service name and the intervals", () =>
    Effect.gen(function* () {
      const s = yield* withEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/base",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=a%20b,other=2",
        OTEL_BSP_SCHEDULE_DELAY: "200",
        OTEL_METRICS_EXPORTER: "none"
      })
      assert.deepStrictEqual(s, {
        tracesUrl: "http://collector:4318/base/v1/traces",
        metricsUrl: undefined,
        protocol: "http/json",
        serviceName: "agentwire-test",
        headers: { "x-api-key": "a b", other: "2" },
        tracesInterval: Duration.millis(200),
        metricsInterval: undefined
      })
      const defaults = yield* withEnv({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "https://m.example/v1/metrics" })
      assert.strictEqual(defaults?.protocol, "http/protobuf")
      assert.strictEqual(defaults?.tracesUrl, undefined)
      assert.strictEqual(defaults?.metricsUrl, "https://m.example/v1/metrics")
    }))

  it.effect("leaves the service name to OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES when they name one", () =>
    Effect.gen(function* () {
      const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }
      assert.isUndefined((yield* withEnv({ ...endpoint, OTEL_SERVICE_NAME: "mine" }))?.serviceName)
      assert.isUndefined((yield* withEnv({ ...endpoint, OTEL_RESOURCE_ATTRIBUTES: "service.name=mine,a=b" }))?.serviceName)
      assert.strictEqual((yield* withEnv({ ...endpoint, OTEL_RESOURCE_ATTRIBUTES: "a=b" }))?.serviceName, "agentwire-test")
    }))

  it.effect("refuses unusable values naming the variable, never echoing the value", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://secret-host" }, "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL"],
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://user:pw-secret@h:4318" }, "OTEL_EXPORTER_OTLP_ENDPOINT must not carry credentials"],
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "OTEL_EXPORTER_OTLP_PROTOCOL must be"],
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318", OTEL_EXPORTER_OTLP_HEADERS: "secret-no-equals" }, "OTEL_EXPORTER_OTLP_HEADERS must be"],
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318", OTEL_RESOURCE_ATTRIBUTES: "a=%E0%A4%A" }, "OTEL_RESOURCE_ATTRIBUTES must be"],
        [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:4318", OTEL_BSP_SCHEDULE_DELAY: "-1" }, "OTEL_BSP_SCHEDULE_DELAY must be"]
      ]
      for (const [env, message] of cases) {
        const exit = yield* Effect.exit(withEnv(env))
        assert.isTrue(Exit.isFailure(exit), message)
        const error = Exit.isFailure(exit) ? JSON.stringify(exit.cause) : ""
        assert.include(error, message)
        assert.notInclude(error, "secret")
        assert.include(error, "\"exitCode\":2")
      }
    }))

  it("parses key=value lists (percent-decoded) and rejects malformed ones", () => {
    assert.deepStrictEqual(parseKeyValues(" a = 1 ,b=x%2Cy,, "), { a: "1", b: "x,y" })
    assert.isUndefined(parseKeyValues("=1"))
    assert.isUndefined(parseKeyValues("a"))
  })
})

describe("--metrics-listen", () => {
  it("accepts HOST:PORT and [IPv6]:PORT, nothing else", () => {
    assert.deepStrictEqual(parseListen("127.0.0.1:9464"), { host: "127.0.0.1", port: 9464 })
    assert.deepStrictEqual(parseListen("[::1]:0"), { host: "::1", port: 0 })
    assert.deepStrictEqual(parseListen("metrics.internal:80"), { host: "metrics.internal", port: 80 })
    for (const bad of ["9464", "127.0.0.1", "127.0.0.1:65536", ":9464", "::1:9464", "h:p"]) assert.isUndefined(parseListen(bad), bad)
  })
})

describe("Prometheus text parser (test support)", () => {
  it.effect("parses what Effect's formatter produces for counters, labelled gauges and histograms", () =>
    Effect.gen(function* () {
      const counter = Metric.counter("t_requests_total", { description: "Requests", incremental: true })
      const gauge = Metric.gauge("t_state", { description: "State \"quoted\" \\ back" })
      const histogram = Metric.histogram("t_latency_seconds", { description: "Latency", boundaries: [0.1, 1] })
      yield* Metric.update(counter, 3)
      yield* Metric.update(Metric.withAttributes(gauge, { state: "a\"b\\c\nd" }), 1)
      yield* Metric.update(histogram, 0.05)
      yield* Metric.update(histogram, 5)
      const text = yield* PrometheusMetrics.format()
      const parsed = parsePrometheusText(text)
      assert.strictEqual(valueOf(parsed, "t_requests_total"), 3)
      assert.strictEqual(valueOf(parsed, "t_state", { state: "a\"b\\c\nd" }), 1)
      assert.strictEqual(parsed.families.get("t_requests_total")?.type, "counter")
      assert.strictEqual(parsed.families.get("t_latency_seconds")?.type, "histogram")
      assert.strictEqual(valueOf(parsed, "t_latency_seconds_count"), 2)
      assert.strictEqual(valueOf(parsed, "t_latency_seconds_bucket", { le: "+Inf" }), 2)
      assert.strictEqual(sumOf(parsed, "t_latency_seconds_bucket", { le: "0.1" }), 1)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))

  it("rejects malformed lines, naming the line", () => {
    const bad: ReadonlyArray<readonly [string, RegExp]> = [
      ["m{a=\"1\"} x", /line 1: invalid value/],
      ["m{a=1} 1", /line 1: label value of a is not quoted/],
      ["m{a=\"1\",a=\"2\"} 1", /line 1: duplicate label a/],
      ["m{a=\"1} 1", /line 1: unterminated/],
      ["m{a=\"\\t\"} 1", /line 1: invalid escape/],
      ["# TYPE m counter\n# TYPE m gauge", /line 2: second TYPE/],
      ["m 1\n# TYPE m counter", /line 2: TYPE after samples/],
      ["# TYPE m countr", /line 1: invalid type/],
      ["1m 1", /line 1: not a sample/],
      ["m{1a=\"x\"} 1", /line 1: invalid label name/],
      ["m1", /line 1: expected ' value/]
    ]
    for (const [text, error] of bad) assert.throws(() => parsePrometheusText(text), error, text)
    assert.strictEqual(valueOf(parsePrometheusText("m{a=\"1\"} +Inf 1700000000000\n"), "m"), Infinity)
  })
})
