/**
 * `GET /metrics` on the dev Core's server: every metric of the process in the Prometheus text format (0.0.4),
 * behind the operator token (`Authorization: Bearer <operator token>`, compared in constant time, never
 * logged). A scraper that cannot hold the token uses the separate `--metrics-listen` address instead
 * (src/bin/MetricsListener.ts). Labels are fixed vocabularies (states, outcomes, codes), never an id or text
 * from a peer; the metric names are in docs/observability.md.
 */
import { Effect, type Layer, type Redacted } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { logUnauthorized } from "./OperatorApi.js"
import * as OperatorToken from "./OperatorToken.js"

export const MetricsPath = "/metrics"

/** The Prometheus text exposition format's content type. */
export const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

const authorized = (token: Redacted.Redacted<string>, request: HttpServerRequest.HttpServerRequest): boolean => {
  const header = request.headers["authorization"]
  if (header === undefined || !header.startsWith("Bearer ")) return false
  return OperatorToken.matches(token, header.slice("Bearer ".length).trim())
}

/** Registers `GET /metrics` (operator token required; 401 otherwise) on the current router. */
export const layer = (token: Redacted.Redacted<string>): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.use((router) =>
    router.add("GET", MetricsPath, (request) =>
      authorized(token, request)
        ? Effect.map(PrometheusMetrics.format(), (body) => HttpServerResponse.text(body, { contentType: PrometheusContentType }))
        : Effect.as(
          logUnauthorized(request),
          HttpServerResponse.jsonUnsafe(
            { error: "unauthorized", detail: "Authorization: Bearer <operator token> required" },
            { status: 401 }
          )
        ))
  )
