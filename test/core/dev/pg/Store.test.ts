/**
 * The store on PostgreSQL: every store case that runs on SQLite (Store, Recovery, TurnJournal) runs here
 * too, each in a schema of its own; plus what only PostgreSQL has (a shared database, the URL's password).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import { describeDatabaseUrl } from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"
import { recoveryCases } from "../cases/RecoveryCases.js"
import { settleJournalCases } from "../cases/SettleCases.js"
import { storeCases } from "../cases/StoreCases.js"
import { turnJournalCases } from "../cases/TurnJournalCases.js"
import { migrations } from "../../../../src/core/dev/Migrations.js"

/** Every migration id, in order (`<id>_<name>`). */
const migrationIds = Object.keys(migrations).map((key) => Number(key.split("_")[0]))

describePostgres("Store on PostgreSQL", (url) => {
  const store = withSchema(url, (schema) =>
    Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layerTest)))

  describe("Store", () => storeCases(store))
  describe("Settle with journal entries", () => settleJournalCases(store))
  describe("Recovery", () => recoveryCases(store))
  describe("TurnJournal", () => turnJournalCases(store))

  it.effect("migrates a fresh schema to every table of the SQLite store", () =>
    Effect.gen(function* () {
      const tables = Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql`SELECT table_name FROM information_schema.tables
          WHERE table_schema = current_schema() ORDER BY table_name`
        const applied = yield* sql`SELECT migration_id FROM agentwire_migrations ORDER BY migration_id`
        return { tables: rows.map((r) => String(r.table_name)), applied: applied.map((r) => Number(r.migration_id)) }
      })
      const first = yield* Effect.scoped(Effect.flatMap(Layer.build(store), (ctx) => Effect.provideContext(tables, ctx)))
      assert.deepStrictEqual(first.applied, migrationIds)
      for (const table of ["devices", "device_credentials", "device_declarations", "device_kinds", "sessions", "turns", "turn_events", "turn_inputs", "interactions", "write_reservations", "device_leases", "suspension_attempts", "core_nodes", "node_requests", "session_initializations", "session_mcp_secrets"]) {
        assert.include(first.tables, table)
      }
    }))

  it.effect("opens a migrated schema again without applying anything", () =>
    Effect.gen(function* () {
      const reopened = withSchema(url, (schema) => {
        const open = () => Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layerTest))
        return Layer.unwrap(Effect.gen(function* () {
          const firstApplied = yield* Effect.scoped(Effect.flatMap(Layer.build(open()), (ctx) =>
            Effect.provideContext(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT migration_id FROM agentwire_migrations`), ctx)))
          assert.strictEqual(firstApplied.length, migrationIds.length)
          return open()
        }))
      })
      const applied = yield* Effect.scoped(Effect.flatMap(Layer.build(reopened), (ctx) =>
        Effect.provideContext(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT migration_id FROM agentwire_migrations`), ctx)))
      assert.deepStrictEqual(applied.map((r) => Number(r.migration_id)), migrationIds)
    }))

  it.effect("never shows the URL's password: not in the open error, not in the store's description", () =>
    Effect.gen(function* () {
      const secret = "s3cr3t-pa55"
      const parsed = new URL(url)
      parsed.username = parsed.username === "" ? "postgres" : parsed.username
      parsed.password = secret
      parsed.pathname = "/agentwire_no_such_database"
      parsed.searchParams.set("password", secret)
      const bad = parsed.toString()
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(
        Store.layer({ _tag: "postgres", url: Redacted.make(bad) }).pipe(Layer.provide(DevIds.layerTest))
      )))
      assert.isTrue(Exit.isFailure(exit))
      const text = JSON.stringify(exit) + String(Exit.isFailure(exit) ? exit.cause : "")
      assert.notInclude(text, secret)
      assert.include(text, "agentwire_no_such_database")
      const described = Store.describeLocation({ _tag: "postgres", url: Redacted.make(bad) })
      assert.notInclude(described, secret)
      assert.include(described, ":***@")
    }))
})

describe("describeDatabaseUrl", () => {
  it("keeps scheme, user, host, port and database; drops the password and every query parameter", () => {
    assert.strictEqual(
      describeDatabaseUrl("postgres://core:hunter2@db.internal:6543/agentwire?sslmode=require&password=hunter2"),
      "postgres://core:***@db.internal:6543/agentwire"
    )
    assert.strictEqual(describeDatabaseUrl("postgresql://127.0.0.1/test"), "postgresql://127.0.0.1/test")
    assert.strictEqual(describeDatabaseUrl("postgres://a:b@[bad"), "<unparsable database URL>")
  })
})
