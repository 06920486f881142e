/**
 * The Turn start's two probes (issue 18, migration 11, docs/store.md "Keys"): a Session's unfinished Turns and
 * whether one was ever dispatched are answered from partial indexes that hold only those Turns, never from a scan
 * of the Session's Turns. SQLite uses a partial index only when the query repeats its predicate term, so the plans
 * are read for the predicates `TurnStartChecks` and `TurnStore` write. Upgrading a store at migration 10 keeps its
 * Turns and answers the probes from the new indexes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { migrations, MigrationsTable } from "../../../src/core/dev/Migrations.js"
import * as NodeSqliteClient from "../../../src/core/dev/sqlite/NodeSqliteClient.js"
import * as Store from "../../../src/core/dev/Store.js"

/** The query plan's detail lines (`EXPLAIN QUERY PLAN`). */
const planOf = (statement: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe(`EXPLAIN QUERY PLAN ${statement}`)
    return rows.map((row) => String((row as { detail: unknown }).detail))
  })

const probes = [
  {
    name: "unfinished Turn of a Session (start checks, unfinishedOf)",
    statement: "SELECT 1 FROM turns WHERE session_id = 's' AND status IN ('queued', 'running') LIMIT 1",
    index: "turns_unfinished_by_session"
  },
  {
    name: "dispatched Turn of a Session (start checks, hasDispatched)",
    statement: "SELECT turn_id FROM turns WHERE session_id = 's' AND dispatched_at_ms IS NOT NULL LIMIT 1",
    index: "turns_dispatched_by_session"
  },
  {
    name: "the start checks' one statement",
    statement: `SELECT s.*,
      EXISTS (SELECT 1 FROM turns WHERE session_id = s.session_id AND status IN ('queued', 'running')) AS start_unfinished,
      EXISTS (SELECT 1 FROM turns WHERE session_id = s.session_id AND dispatched_at_ms IS NOT NULL) AS start_dispatched
    FROM sessions s WHERE s.session_id = 's'`,
    index: "turns_unfinished_by_session"
  }
] as const

const store = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))

describe("Turn start probes", () => {
  for (const probe of probes) {
    it.effect(`${probe.name}: a partial index, no scan of turns`, () =>
      Effect.gen(function* () {
        const plan = yield* planOf(probe.statement)
        assert.isTrue(plan.some((line) => line.includes(probe.index)), plan.join(" | "))
        assert.isFalse(plan.some((line) => /^SCAN turns\b/.test(line)), plan.join(" | "))
      }).pipe(Effect.provide(store)))
  }

  it.effect("the start checks read both partial indexes", () =>
    Effect.gen(function* () {
      const plan = (yield* planOf(probes[2].statement)).join(" | ")
      assert.include(plan, "turns_unfinished_by_session")
      assert.include(plan, "turns_dispatched_by_session")
    }).pipe(Effect.provide(store)))

  it.effect("a store at migration 10 upgrades: its Turns are kept and the probes answer from the new indexes", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const upTo = (last: number) =>
        Migrator.make({})({
          loader: Migrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([key]) => Number(key.split("_")[0]) <= last))),
          table: MigrationsTable
        })
      yield* upTo(10)
      yield* sql`INSERT INTO sessions (session_id, agent_kind, environment_type, environment_json, configuration_json, created_at_ms)
        VALUES ('s', 'scripted', 'none', NULL, '{}', 1)`
      for (const [turn, status, dispatched] of [["t1", "completed", 5], ["t2", "running", 6], ["t3", "queued", null]] as const) {
        yield* sql`INSERT INTO turns (turn_id, session_id, run_id, status, attempt, input_json, input_cursor, created_at_ms, dispatched_at_ms)
          VALUES (${turn}, 's', ${`run-${turn}`}, ${status}, 1, '{}', 0, 1, ${dispatched})`
      }
      yield* upTo(11)
      const indexes = (yield* sql`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'turns'`).map((r) => String(r.name))
      assert.includeMembers(indexes, ["turns_unfinished_by_session", "turns_dispatched_by_session"])
      assert.notInclude(indexes, "turns_by_session_status")
      assert.notInclude(indexes, "turns_by_session_dispatched")
      const unfinished = yield* sql`SELECT turn_id FROM turns INDEXED BY turns_unfinished_by_session
        WHERE session_id = 's' AND status IN ('queued', 'running') ORDER BY turn_id`
      assert.deepStrictEqual(unfinished.map((r) => r.turn_id), ["t2", "t3"])
      const dispatched = yield* sql`SELECT turn_id FROM turns INDEXED BY turns_dispatched_by_session
        WHERE session_id = 's' AND dispatched_at_ms IS NOT NULL ORDER BY turn_id`
      assert.deepStrictEqual(dispatched.map((r) => r.turn_id), ["t1", "t2"])
    }).pipe(Effect.provide(NodeSqliteClient.layer({ filename: ":memory:" }))))
})
