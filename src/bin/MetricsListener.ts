/**
 * A separate HTTP listener serving only `GET /metrics` (Prometheus text format 0.0.4) without authentication:
 * `agentwire core --metrics-listen HOST:PORT` and `agentwire daemon --metrics-port PORT` (always 127.0.0.1).
 * Every other path answers 404, every other method on `/metrics` 405. It serves nothing but metric values:
 * counters, gauges and histograms whose labels are fixed vocabularies (states, outcomes, codes, reasons),
 * never an id, a credential, a token or payload text. Scrapes create no spans.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { HttpMiddleware, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { createServer } from "node:http"

export const MetricsPath = "/metrics"

/** The Prometheus text exposition format's content type. */
export const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

/** The current metric values as a Prometheus text response. */
export const scrape: Effect.Effect<HttpServerResponse.HttpServerResponse> = Effect.map(
  PrometheusMetrics.format(),
  (body) => HttpServerResponse.text(body, { contentType: PrometheusContentType })
)

const app = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = new URL(request.url, "http://metrics.invalid").pathname
  if (path !== MetricsPath) return HttpServerResponse.text("not found\n", { status: 404 })
  if (request.method !== "GET" && request.method !== "HEAD") {
    return HttpServerResponse.text("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } })
  }
  return yield* scrape
})

/** Where the metrics listener is bound (`http://HOST:PORT`). */
export class MetricsListener extends Context.Service<MetricsListener, { readonly url: string }>()(
  "agentwire/bin/MetricsListener"
) {}

/** Serves `/metrics` on `host:port` (0 picks a free port) while the layer's scope is open. */
export const layer = (host: string, port: number) =>
  Layer.effect(
    MetricsListener,
    Effect.map(HttpServer.HttpServer, (server: HttpServer.HttpServer["Service"]) => MetricsListener.of({ url: HttpServer.formatAddress(server.address) }))
  ).pipe(
    Layer.provideMerge(HttpServer.serve()(app)),
    Layer.provide(HttpMiddleware.layerTracerDisabledForUrls([MetricsPath])),
    Layer.provide(NodeHttpServer.layerServer(() => createServer(), { host, port }))
  )

/** `HOST:PORT` (IPv6 in brackets) of `--metrics-listen`; `undefined` for anything else. */
export const parseListen = (value: string): { readonly host: string; readonly port: number } | undefined => {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value.trim())
  if (m === null) return undefined
  const port = Number(m[3])
  if (port > 65535) return undefined
  return { host: m[1] ?? m[2]!, port }
}
