import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DeviceCredentials, digestCredential } from "../../../src/core/DeviceCredentials.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { settleJournalCases } from "./cases/SettleCases.js"
import { storeCases } from "./cases/StoreCases.js"
import { migrations } from "../../../src/core/dev/Migrations.js"

/** Every migration id, in order (`<id>_<name>`). */
const migrationIds = Object.keys(migrations).map((key) => Number(key.split("_")[0]))

const memory = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))

describe("Store", () => {
  it.effect("runs the migrations on open and again without change", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-store-"))
      try {
        const tables = Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
          const applied = yield* sql`SELECT migration_id FROM agentwire_migrations`
          return { tables: rows.map((r) => String(r.name)), applied: applied.map((r) => Number(r.migration_id)) }
        })
        const first = yield* Effect.scoped(Layer.build(Store.layerDataDir(dir).pipe(Layer.provide(DevIds.layerTest))).pipe(
          Effect.flatMap((ctx) => Effect.provideContext(tables, ctx))
        ))
        const second = yield* Effect.scoped(Layer.build(Store.layerDataDir(dir).pipe(Layer.provide(DevIds.layerTest))).pipe(
          Effect.flatMap((ctx) => Effect.provideContext(tables, ctx))
        ))
        assert.deepStrictEqual(first, second)
        assert.deepStrictEqual(first.applied, migrationIds)
        for (const table of ["devices", "device_credentials", "device_declarations", "device_kinds", "sessions", "turns", "turn_events", "turn_inputs", "interactions", "write_reservations", "device_leases", "suspension_attempts", "core_nodes", "node_requests", "session_initializations", "session_mcp_secrets"]) {
          assert.include(first.tables, table)
        }
        assert.include(readdirSync(dir), "agentwire.db")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))

  storeCases(memory)
  settleJournalCases(memory)

  it.effect("never writes the credential into the database file", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-store-"))
      try {
        const credential = yield* Effect.scoped(
          Layer.build(Store.layerDataDir(dir).pipe(Layer.provide(DevIds.layerTest))).pipe(
            Effect.flatMap((ctx) => Effect.provideContext(Effect.gen(function* () {
              return yield* (yield* DeviceCredentials).issue("dev-a")
            }), ctx))
          )
        )
        const bytes = readdirSync(dir).map((f) => readFileSync(join(dir, f)).toString("latin1")).join("")
        assert.notInclude(bytes, Redacted.value(credential))
        assert.include(bytes, digestCredential(credential))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))
})
