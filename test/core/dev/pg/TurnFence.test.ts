/**
 * Fenced journal appends on PostgreSQL (docs/multi-node.md "Fenced Turn writes"): an append carrying a stale
 * owner lease (`JournalFence`) is refused with `LeaseLost` and stores nothing, while the other appends of the
 * same group-commit batch are stored; the current owner's appends are stored.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import { JournalFence, LeaseLost, OwnerLeases } from "../../../../src/core/dev/pg/OwnerLeases.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

const node = { nodeId: "node-a", nodeUrl: "http://127.0.0.1:7401", ttlMs: 15_000 }

const turnOf = (turnId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
      VALUES (${`s-${turnId}`}, 'scripted', 'none', '{}', 0)`
    yield* Effect.flatMap(TurnStore, (t) => t.create({ turnId, sessionId: `s-${turnId}`, runId: `run-${turnId}`, input: { text: "x" } as any }))
  })

const entry = (seq: number) => ({ seq, attempt: 1, kind: "fact" as const, type: "Dispatching", bodyJson: "{}" })

const seqs = (turnId: string) =>
  Effect.map(Effect.flatMap(TurnStore, (t) => t.events(turnId, 0)), (events) => events.map((e) => e.seq))

describePostgres("fenced journal appends on PostgreSQL", (url) => {
  const layer = withSchema(url, (schema) =>
    OwnerLeases.layer(node).pipe(
      Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema }))),
      Layer.provide(DevIds.layerTest)
    ))

  it.effect("refuses only the stale owner's append of a batch and stores the others", () =>
    Effect.gen(function* () {
      const leases = yield* OwnerLeases
      const turns = yield* TurnStore
      yield* turnOf("t-stale")
      yield* turnOf("t-current")
      yield* turnOf("t-plain")
      const stale = yield* leases.claim("dev-1")
      yield* leases.claim("dev-1") // a newer owner of dev-1
      const current = yield* leases.claim("dev-2")
      // Submitted together: the group commit puts them in one batch, which fails on the stale lease; each is
      // then committed alone.
      const [a, b, c] = yield* Effect.all([
        Effect.exit(Effect.provideService(turns.appendEvents("t-stale", [entry(1)]), JournalFence, stale)),
        Effect.exit(Effect.provideService(turns.appendEvents("t-current", [entry(1), entry(2)]), JournalFence, current)),
        Effect.exit(turns.appendEvents("t-plain", [entry(1)]))
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(a, Exit.fail(new LeaseLost({ deviceId: "dev-1", generation: 1 })))
      assert.isTrue(Exit.isSuccess(b))
      assert.isTrue(Exit.isSuccess(c))
      assert.deepStrictEqual(yield* seqs("t-stale"), [])
      assert.deepStrictEqual(yield* seqs("t-current"), [1, 2])
      assert.deepStrictEqual(yield* seqs("t-plain"), [1])
    }).pipe(Effect.provide(layer)))
})
