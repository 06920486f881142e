/**
 * The operator API's HTTP helpers shared with the probes: the 405 answer and the unauthenticated probes on the
 * server root, `/healthz` (the process serves HTTP) and `/readyz` (the store answers a query). Their bodies
 * carry no data beyond the status.
 */
import { Effect } from "effect"
import { type HttpRouter, HttpServerResponse } from "effect/http"
import type { SqlClient } from "effect/sql"

const json = (status: number, body: unknown) => HttpServerResponse.jsonUnsafe(body, { status })

/** The methods a path that does not serve them answers with 405 (and an `Allow` header). */
export type AnsweredMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
export const AnsweredMethods: ReadonlyArray<AnsweredMethod> = ["GET", "POST", "PUT", "PATCH", "DELETE"]

/**
 * Registers `/healthz` and `/readyz` (GET; other methods 405).
 */
export const probes = (router: HttpRouter.HttpRouter, sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    yield* router.add("GET", "/healthz", Effect.succeed(json(200, { status: "ok" })))
    yield* router.add(
      "GET",
      "/readyz",
      sql`SELECT 1 AS ready`.pipe(
        Effect.as(json(200, { status: "ready" })),
        Effect.orElseSucceed(() => json(503, { status: "not_ready", reason: "store_unavailable" }))
      )
    )
    for (const path of ["/healthz", "/readyz"] as const) {
      for (const method of AnsweredMethods.filter((m) => m !== "GET")) {
        yield* router.add(method, path, Effect.succeed(methodNotAllowed(["GET"])))
      }
    }
  })

/** 405 with an `Allow` header. */
export const methodNotAllowed = (allowed: ReadonlyArray<string>) =>
  HttpServerResponse.jsonUnsafe(
    { error: "method_not_allowed", detail: `allowed: ${allowed.join(", ")}` },
    { status: 405, headers: { allow: allowed.join(", ") } }
  )
