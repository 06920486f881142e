/**
 * PostgreSQL for the multinode suite: the database of the integration tests (`AGENTWIRE_TEST_DATABASE_URL`, else
 * `postgres://postgres@127.0.0.1:5432/test`, trust auth), one admin connection held for the suite (schemas per
 * round, counts, WAL position), and daemon credentials issued straight through the store. The URL is never
 * logged (it may carry a password).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { createConnection } from "node:net"
import { DevIds } from "../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../src/core/dev/DeviceStore.js"
import * as Store from "../../src/core/dev/Store.js"

export const benchDatabaseUrl = (): string => {
  const explicit = process.env["AGENTWIRE_TEST_DATABASE_URL"]
  return explicit !== undefined && explicit !== "" ? explicit : "postgres://postgres@127.0.0.1:5432/test"
}

/** Why the database does not answer (a TCP connect to its host:port within 2 s), or undefined when it does. */
export const probePostgres = (url: string): Promise<string | undefined> =>
  new Promise((resolve) => {
    const parsed = new URL(url)
    const host = parsed.hostname === "" ? "127.0.0.1" : parsed.hostname
    const port = parsed.port === "" ? 5432 : Number(parsed.port)
    const socket = createConnection({ host, port })
    socket.setTimeout(2_000)
    socket.once("connect", () => {
      socket.destroy()
      resolve(undefined)
    })
    socket.once("timeout", () => {
      socket.destroy()
      resolve(`no answer on ${host}:${port} within 2 s`)
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(`${host}:${port} ${error.code ?? "unreachable"}`))
  })

export interface PgAdmin {
  readonly query: (text: string) => Promise<ReadonlyArray<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

/** One admin connection for the suite (closed by `close`); rejects when the database refuses it. */
export const pgAdmin = async (url: string): Promise<PgAdmin> => {
  const runtime = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
  const query = (text: string) =>
    runtime.runPromise(Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      return yield* sql.unsafe(text)
    })) as Promise<
      ReadonlyArray<Record<string, unknown>>
    >
  try {
    await query("SELECT 1")
  } catch (error) {
    await runtime.dispose()
    throw error
  }
  return { query, close: () => runtime.dispose() }
}

/** A fresh schema name (lower-case identifier, safe to interpolate). */
export const freshSchemaName = (): string => `aw_bench_${randomUUID().replaceAll("-", "").slice(0, 20)}`

/** The URL a Core process uses for `schema` (as AGENTWIRE_CORE_DATABASE: the environment, never argv). */
export const urlForSchema = (url: string, schema: string): string => {
  const parsed = new URL(url)
  if (parsed.username === "") parsed.username = "postgres"
  parsed.searchParams.set("options", `-c search_path=${schema}`)
  return parsed.toString()
}

/** Issues one daemon credential per device id in `schema` (the store's own path; the schema is migrated by then). */
export const issueCredentials = (url: string, schema: string, deviceIds: ReadonlyArray<string>): Promise<Array<string>> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function* () {
    const ctx = yield* Layer.build(Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layer)))
    const store = Context.get(ctx, DeviceStore)
    return yield* Effect.forEach(deviceIds, (id) => Effect.map(store.issueCredential(id), Redacted.value))
  })))
