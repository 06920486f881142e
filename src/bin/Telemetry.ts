/**
 * OpenTelemetry export of the binary (docs/observability.md): traces and metrics over OTLP/HTTP, configured by
 * the standard `OTEL_*` variables, and the process's event-loop delay as a metric.
 *
 * Export is on only when an endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) and `OTEL_SDK_DISABLED` is not
 * `true`; otherwise `layer` holds only an empty flush registry: no exporter, no HTTP client, no buffer. `OTEL_TRACES_EXPORTER=none` or
 * `OTEL_METRICS_EXPORTER=none` turns one signal off. `OTEL_EXPORTER_OTLP_PROTOCOL` is `http/protobuf`
 * (default, as the OpenTelemetry specification says) or `http/json`; `grpc` is refused at start.
 *
 * The exporters are Effect's own (`effect/observability`: OtlpTracer, OtlpMetrics, OtlpSerialization), so
 * no `@opentelemetry/*` package is loaded. Header values (`OTEL_EXPORTER_OTLP_HEADERS`, which may carry a
 * vendor key) and the endpoint are never logged or printed; a bad value is named by its variable only.
 */
import { Config, Duration, Effect, Layer, Metric, Option, Schedule } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpExporter, OtlpMetrics, OtlpSerialization, OtlpTracer } from "effect/observability"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { AgentwireVersion } from "./BuildInfo.js"
import { CommandFailed, ExitCode } from "./Exit.js"

export type OtlpProtocol = "http/json" | "http/protobuf"

/** What the environment asked for; `undefined` endpoints mean that signal is not exported. */
export interface TelemetrySettings {
  readonly tracesUrl: string | undefined
  readonly metricsUrl: string | undefined
  readonly protocol: OtlpProtocol
  /** `undefined` when OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names the service (they win). */
  readonly serviceName: string | undefined
  readonly headers: Readonly<Record<string, string>> | undefined
  readonly tracesInterval: Duration.Duration | undefined
  readonly metricsInterval: Duration.Duration | undefined
}

export const TelemetryEnvVars = {
  endpoint: "OTEL_EXPORTER_OTLP_ENDPOINT",
  tracesEndpoint: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  metricsEndpoint: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
  protocol: "OTEL_EXPORTER_OTLP_PROTOCOL",
  headers: "OTEL_EXPORTER_OTLP_HEADERS",
  serviceName: "OTEL_SERVICE_NAME",
  resourceAttributes: "OTEL_RESOURCE_ATTRIBUTES",
  disabled: "OTEL_SDK_DISABLED",
  tracesExporter: "OTEL_TRACES_EXPORTER",
  metricsExporter: "OTEL_METRICS_EXPORTER",
  tracesInterval: "OTEL_BSP_SCHEDULE_DELAY",
  metricsInterval: "OTEL_METRIC_EXPORT_INTERVAL"
} as const

const usage = (variable: string, problem: string) =>
  new CommandFailed({ text: `${variable} ${problem}`, exitCode: ExitCode.usage })

const optionalString = (name: string) =>
  Config.option(Config.String(name)).pipe(
    Effect.map((o) => Option.filter(Option.map(o, (s) => s.trim()), (s) => s !== "")),
    Effect.mapError(() => usage(name, "cannot be read"))
  )

/** An http(s) URL without user info; the value itself is never echoed. */
const httpUrl = (name: string, value: string) =>
  Effect.suspend(() => {
    let url: URL
    try {
      url = new URL(value)
    } catch {
      return Effect.fail(usage(name, "must be an http:// or https:// URL"))
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return Effect.fail(usage(name, "must be an http:// or https:// URL"))
    if (url.username !== "" || url.password !== "") {
      return Effect.fail(usage(name, `must not carry credentials (put them in ${TelemetryEnvVars.headers})`))
    }
    return Effect.succeed(url)
  })

/** `base` + `/v1/<signal>` (the specification's rule for the signal-neutral endpoint). */
const signalUrl = (base: URL, signal: "traces" | "metrics"): string => {
  const url = new URL(base.toString())
  url.pathname = `${url.pathname.endsWith("/") ? url.pathname : url.pathname + "/"}v1/${signal}`
  return url.toString()
}

/** `k=v,k2=v2`, keys and values percent-decoded and trimmed (W3C baggage-like, as the specification says). */
export const parseKeyValues = (text: string): Record<string, string> | undefined => {
  const out: Record<string, string> = {}
  for (const entry of text.split(",")) {
    if (entry.trim() === "") continue
    const eq = entry.indexOf("=")
    if (eq <= 0) return undefined
    try {
      const key = decodeURIComponent(entry.slice(0, eq).trim())
      if (key === "") return undefined
      out[key] = decodeURIComponent(entry.slice(eq + 1).trim())
    } catch {
      return undefined
    }
  }
  return out
}

const millis = (name: string) =>
  Effect.flatMap(optionalString(name), (o) => {
    if (Option.isNone(o)) return Effect.succeed(undefined)
    const n = Number(o.value)
    return Number.isInteger(n) && n > 0 ? Effect.succeed(Duration.millis(n)) : Effect.fail(usage(name, "must be a positive integer (milliseconds)"))
  })

/**
 * Reads the `OTEL_*` variables. `undefined` when nothing is exported (no endpoint, or disabled). Fails with a
 * usage error (exit 2) naming the variable when a value is unusable.
 */
export const settingsFromEnv = (defaultServiceName: string): Effect.Effect<TelemetrySettings | undefined, CommandFailed> =>
  Effect.gen(function* () {
    const disabled = yield* optionalString(TelemetryEnvVars.disabled)
    if (Option.isSome(disabled) && disabled.value.toLowerCase() === "true") return undefined
    const endpoint = yield* optionalString(TelemetryEnvVars.endpoint)
    const tracesEndpoint = yield* optionalString(TelemetryEnvVars.tracesEndpoint)
    const metricsEndpoint = yield* optionalString(TelemetryEnvVars.metricsEndpoint)
    const base = Option.isSome(endpoint) ? yield* httpUrl(TelemetryEnvVars.endpoint, endpoint.value) : undefined
    const exporterOn = (name: string) =>
      Effect.map(optionalString(name), (o) => Option.isNone(o) || o.value.split(",").map((s) => s.trim().toLowerCase()).includes("otlp"))
    let tracesUrl = Option.isSome(tracesEndpoint)
      ? (yield* httpUrl(TelemetryEnvVars.tracesEndpoint, tracesEndpoint.value)).toString()
      : base === undefined ? undefined : signalUrl(base, "traces")
    let metricsUrl = Option.isSome(metricsEndpoint)
      ? (yield* httpUrl(TelemetryEnvVars.metricsEndpoint, metricsEndpoint.value)).toString()
      : base === undefined ? undefined : signalUrl(base, "metrics")
    if (!(yield* exporterOn(TelemetryEnvVars.tracesExporter))) tracesUrl = undefined
    if (!(yield* exporterOn(TelemetryEnvVars.metricsExporter))) metricsUrl = undefined
    if (tracesUrl === undefined && metricsUrl === undefined) return undefined

    const protocolText = Option.getOrElse(yield* optionalString(TelemetryEnvVars.protocol), () => "http/protobuf")
    if (protocolText !== "http/json" && protocolText !== "http/protobuf") {
      return yield* usage(TelemetryEnvVars.protocol, "must be http/protobuf or http/json (grpc is not supported)")
    }
    const headersText = yield* optionalString(TelemetryEnvVars.headers)
    const headers = Option.isSome(headersText) ? parseKeyValues(headersText.value) : undefined
    if (Option.isSome(headersText) && headers === undefined) {
      return yield* usage(TelemetryEnvVars.headers, "must be key=value pairs separated by commas (percent-encoded)")
    }
    const resourceText = yield* optionalString(TelemetryEnvVars.resourceAttributes)
    const resource = Option.isSome(resourceText) ? parseKeyValues(resourceText.value) : {}
    if (resource === undefined) {
      return yield* usage(TelemetryEnvVars.resourceAttributes, "must be key=value pairs separated by commas (percent-encoded)")
    }
    const namedService = Option.isSome(yield* optionalString(TelemetryEnvVars.serviceName)) || resource["service.name"] !== undefined
    return {
      tracesUrl,
      metricsUrl,
      protocol: protocolText,
      serviceName: namedService ? undefined : defaultServiceName,
      headers,
      tracesInterval: yield* millis(TelemetryEnvVars.tracesInterval),
      metricsInterval: yield* millis(TelemetryEnvVars.metricsInterval)
    }
  })

/**
 * The exporters for `settings` (an empty layer for `undefined`). Spans and metrics are buffered and posted
 * in batches; when the layer's scope closes, what is buffered is posted (bounded by the exporters' shutdown
 * timeout). An unreachable collector never fails the process: Effect's exporter pauses for 60 s.
 */
export const layer = (settings: TelemetrySettings | undefined): Layer.Layer<OtlpExporter.Flusher> => {
  if (settings === undefined) return OtlpExporter.layerFlusher
  const resource = {
    ...(settings.serviceName === undefined ? {} : { serviceName: settings.serviceName }),
    serviceVersion: AgentwireVersion
  }
  const traces = settings.tracesUrl === undefined ? OtlpExporter.layerFlusher : OtlpTracer.layer({
    url: settings.tracesUrl,
    resource,
    headers: settings.headers,
    ...(settings.tracesInterval === undefined ? {} : { exportInterval: settings.tracesInterval })
  })
  const metrics = settings.metricsUrl === undefined ? OtlpExporter.layerFlusher : OtlpMetrics.layer({
    url: settings.metricsUrl,
    resource,
    headers: settings.headers,
    ...(settings.metricsInterval === undefined ? {} : { exportInterval: settings.metricsInterval })
  })
  return Layer.mergeAll(traces, metrics).pipe(
    Layer.provide(settings.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(FetchHttpClient.layer)
  )
}

/** The resolved telemetry layer of a command: settings from the environment, then the exporters. */
export const fromEnv = (defaultServiceName: string): Effect.Effect<Layer.Layer<OtlpExporter.Flusher>, CommandFailed> =>
  Effect.map(settingsFromEnv(defaultServiceName), layer)

/**
 * The event-loop delay of this process (`perf_hooks.monitorEventLoopDelay`), as gauges `<prefix>_event_loop_delay_seconds`
 * with `quantile` 0.5, 0.99 and 1 (max), refreshed every `interval` over the window since the last refresh.
 */
export const eventLoopDelay = (prefix: string, interval: Duration.Input = Duration.seconds(5)): Layer.Layer<never> =>
  Layer.effectDiscard(Effect.gen(function* () {
    const histogram = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const h = monitorEventLoopDelay({ resolution: 20 })
        h.enable()
        return h
      }),
      (h) => Effect.sync(() => h.disable())
    )
    const gauge = Metric.gauge(`${prefix}_event_loop_delay_seconds`, {
      description: "Event-loop delay of the process over the last refresh window (quantile 1 = max)"
    })
    const refresh = Effect.suspend(() => {
      const values: ReadonlyArray<readonly [string, number]> = [
        ["0.5", histogram.percentile(50)],
        ["0.99", histogram.percentile(99)],
        ["1", histogram.max]
      ]
      histogram.reset()
      return Effect.forEach(values, ([quantile, nanos]) =>
        Metric.update(Metric.withAttributes(gauge, { quantile }), Number.isFinite(nanos) ? nanos / 1e9 : 0), { discard: true })
    })
    yield* Effect.forkScoped(Effect.repeat(Effect.andThen(Effect.sleep(interval), refresh), Schedule.forever))
  }))
