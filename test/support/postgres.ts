/**
 * PostgreSQL for integration tests. They run when `AGENTWIRE_TEST_DATABASE_URL` is set or PostgreSQL
 * answers on 127.0.0.1:5432 (then as `postgres://postgres@127.0.0.1:5432/test`, CI's trust-auth database).
 * Otherwise each PostgreSQL suite shows as one skipped test whose name says why — unless
 * `AGENTWIRE_REQUIRE_POSTGRES=1` (set by `.ci/run`), which turns the skip into a failing test.
 *
 * Each test gets its own schema (`withSchema`), created before and dropped (CASCADE) after it.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { randomUUID } from "node:crypto"
import { probePostgres } from "../../bench/support/postgres.js"

const DefaultUrl = "postgres://postgres@127.0.0.1:5432/test"
const explicitUrl = process.env.AGENTWIRE_TEST_DATABASE_URL
const required = process.env.AGENTWIRE_REQUIRE_POSTGRES === "1"

/** Resolves to why PostgreSQL is unavailable, or undefined when something answers on 127.0.0.1:5432. */
const probeLocal = (): Promise<string | undefined> => probePostgres("postgres://127.0.0.1:5432")

const unavailable: string | undefined = explicitUrl !== undefined && explicitUrl !== "" ? undefined : await probeLocal()

/** The URL of the test database (undefined when PostgreSQL is unavailable). */
export const testDatabaseUrl: string | undefined = unavailable === undefined
  ? (explicitUrl !== undefined && explicitUrl !== "" ? explicitUrl : DefaultUrl)
  : undefined

/**
 * `describe` for a suite that needs PostgreSQL: runs it when available; else one skipped test that says
 * why (or, with AGENTWIRE_REQUIRE_POSTGRES=1, one failing test).
 */
export const describePostgres = (name: string, body: (url: string) => void): void => {
  if (testDatabaseUrl !== undefined) {
    const url = testDatabaseUrl
    describe(name, () => body(url))
    return
  }
  const why = `PostgreSQL unavailable (${unavailable}); set AGENTWIRE_TEST_DATABASE_URL to run`
  describe(name, () => {
    if (required) {
      it(`fails: AGENTWIRE_REQUIRE_POSTGRES=1 but ${why}`, () => assert.fail(why))
    } else {
      it.skip(`skipped: ${why}`, () => {})
    }
  })
}

/** A fresh schema name (lower-case identifier). */
export const freshSchemaName = (): string => `aw_t_${randomUUID().replaceAll("-", "").slice(0, 24)}`

/**
 * Builds `f(schema)` in a schema of its own: created before, dropped with everything in it after (the
 * layer's scope closes first, so the pool of `f` is closed when the schema is dropped).
 */
export const withSchema = <A, E, R>(
  url: string,
  f: (schema: string) => Layer.Layer<A, E, R>
): Layer.Layer<A, unknown, R> =>
  Layer.unwrap(Effect.gen(function* () {
    const admin = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
    const schema = freshSchemaName()
    yield* Effect.acquireRelease(
      admin.unsafe(`CREATE SCHEMA ${schema}`),
      () => admin.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).pipe(Effect.orDie)
    )
    return f(schema)
  }).pipe(Effect.provide(Reactivity.layer)))

const adminRun = <A>(url: string, f: (admin: PgClient.PgClient) => Effect.Effect<A, unknown>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function* () {
    const admin = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
    return yield* f(admin)
  })).pipe(Effect.provide(Reactivity.layer)) as Effect.Effect<A>)

/** Creates a fresh schema for a live test (processes outside the test's scope use it); drop it with `dropSchema`. */
export const createSchema = (url: string): Promise<string> => {
  const schema = freshSchemaName()
  return adminRun(url, (admin) => Effect.as(admin.unsafe(`CREATE SCHEMA ${schema}`), schema))
}

/**
 * The database URL a Core process uses to work in `schema` (its `search_path`), as user `postgres` when the URL
 * names none; `password` is added for tests that check it is never printed (trust auth ignores it).
 */
export const schemaUrl = (url: string, schema: string, password?: string): string => {
  const parsed = new URL(url)
  if (parsed.username === "") parsed.username = "postgres"
  if (password !== undefined) parsed.password = password
  parsed.searchParams.set("options", `-c search_path=${schema}`)
  return parsed.toString()
}

/** Drops a schema made by `createSchema`, with everything in it. */
export const dropSchema = (url: string, schema: string): Promise<void> =>
  adminRun(url, (admin) => Effect.asVoid(admin.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)))

/** Runs one query in `schema` (live tests read what a Core process wrote). */
export const queryIn = (url: string, schema: string, text: string): Promise<ReadonlyArray<Record<string, unknown>>> =>
  adminRun(url, (admin) => admin.unsafe(`SET search_path TO ${schema}`).pipe(Effect.andThen(admin.unsafe(text)))) as Promise<
    ReadonlyArray<Record<string, unknown>>
  >
