/**
 * The database-level Session lock on PostgreSQL (pg/DatabaseSessionLocks.ts), on two nodes with their own pools
 * on one schema: a section held on one node refuses (`tryWithLock`, a Turn start) or holds back (`withLock`) the
 * other node's; two nodes racing Turn starts on one Session leave exactly one Turn (every other start sees it:
 * `turn_active`, as two starts on one node), with no deadlock; the lock is released on every exit. A start's
 * start key outlives its transaction (so its session key is free whenever another start gets the start key),
 * and a lock connection whose COMMIT fails never returns to the pool holding a key.
 */
import { assert, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Semaphore } from "effect"
import { SqlClient, SqlConnection, SqlError } from "effect/sql"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import { OperatorConflict } from "../../../../src/core/dev/OperatorErrors.js"
import * as DatabaseSessionLocks from "../../../../src/core/dev/pg/DatabaseSessionLocks.js"
import * as PgStore from "../../../../src/core/dev/pg/PgStore.js"
import { SessionLocks } from "../../../../src/core/dev/SessionLocks.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"

type Node = Context.Context<SessionLocks | TurnStore | SqlClient.SqlClient>

class Nodes extends Context.Service<Nodes, { readonly a: Node; readonly b: Node }>()("test/SessionLockNodes") {}

const on = (pick: "a" | "b") => <A, E>(e: Effect.Effect<A, E, SessionLocks | TurnStore | SqlClient.SqlClient>) =>
  Effect.flatMap(Nodes, (n) => Effect.provideContext(e, n[pick]))
const onA = on("a")
const onB = on("b")

const sessionRow = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO sessions (session_id, agent_kind, environment_type, configuration_json, created_at_ms)
      VALUES (${sessionId}, 'scripted', 'none', '{}', 0)`)

/** A Turn start's critical section: the one-unfinished-Turn check, then the Turn row. */
const startSection = (sessionId: string, turnId: string) =>
  Effect.gen(function* () {
    const turns = yield* TurnStore
    if (Option.isSome(yield* turns.unfinishedOf(sessionId))) {
      return yield* new OperatorConflict({ reason: "turn_active", detail: "the Session already has an unfinished Turn" })
    }
    yield* Effect.yieldNow
    yield* turns.create({ turnId, sessionId, runId: `run-${turnId}`, input: { text: "hi" } as any })
    return turnId
  })

const start = (sessionId: string, turnId: string) =>
  Effect.flatMap(SessionLocks, (l) => l.forStart(sessionId, startSection(sessionId, turnId)))

/** Advisory locks some backend of this database waits for (a section held back on the other node). */
const waitingAdvisory = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(sql`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`, (r) => Number(r[0]?.n)))

/**
 * Node A's client with its lock connections wrapped: `commit` replaces what `COMMIT` does on them (the real one
 * by default), so a test can hold a section between its `COMMIT` and what follows, or make it fail.
 */
const withLockConnections = (
  sql: SqlClient.SqlClient,
  commit: (real: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
): SqlClient.SqlClient =>
  Object.assign(Object.create(sql) as SqlClient.SqlClient, {
    reserve: Effect.map(sql.reserve, (conn): SqlConnection.Connection =>
      Object.assign(Object.create(conn) as SqlConnection.Connection, {
        executeUnprepared: (statement: string, params: ReadonlyArray<unknown>, transform: undefined) =>
          statement === "COMMIT"
            ? commit(conn.executeUnprepared(statement, params, transform))
            : conn.executeUnprepared(statement, params, transform)
      }))
  })

const keyOf = (what: string) => `hashtextextended(current_schema() || '/${what}/' || $1, 0)`

/** Which of a Session's two keys another backend could take at this moment (taken and dropped at once). */
const freeKeys = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql.unsafe<{ readonly session: unknown; readonly start: unknown }>(`SELECT pg_try_advisory_xact_lock(${keyOf("session")}) AS session, pg_try_advisory_xact_lock(${keyOf("start")}) AS start`, [sessionId]),
      (rows) => ({ session: rows[0]?.session === true, start: rows[0]?.start === true })
    ))

/** Waits (at most 20 s, a hang guard) until another backend can take both of a Session's keys. */
const bothKeysTaken = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(Effect.andThen(
      sql.unsafe("SET LOCAL lock_timeout = '20s'"),
      sql.unsafe(`SELECT pg_advisory_xact_lock(${keyOf("session")}), pg_advisory_xact_lock(${keyOf("start")})`, [sessionId])
    )).pipe(Effect.as("taken" as const), Effect.catch(() => Effect.succeed("still held" as const))))

describePostgres("Database-level Session lock on PostgreSQL", (url) => {
  const nodes = withSchema(url, (schema) =>
    Layer.effectContext(Effect.gen(function* () {
      const nodeOf = () =>
        Layer.build(DatabaseSessionLocks.layer().pipe(
          Layer.provideMerge(Store.layerSql(PgStore.sqlLayer({ url: Redacted.make(url), schema }))),
          Layer.provide(DevIds.layerTest)
        ))
      return Context.make(Nodes, { a: yield* nodeOf(), b: yield* nodeOf() })
    })))

  it.effect("a section held on one node refuses the other node's try and start, and holds back its wait", () =>
    Effect.gen(function* () {
      const held = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* onA(Effect.flatMap(SessionLocks, (l) =>
        l.withLock("s-1", Effect.andThen(Deferred.succeed(held, undefined), Deferred.await(release))))).pipe(Effect.forkChild)
      yield* Deferred.await(held)

      const tried = yield* onB(Effect.flip(Effect.flatMap(SessionLocks, (l) => l.tryWithLock("s-1", Effect.void))))
      assert.strictEqual((tried as OperatorConflict).reason, "session_busy")
      const started = yield* onB(Effect.flip(start("s-1", "t-refused")))
      assert.strictEqual((started as OperatorConflict).reason, "session_busy")
      // Another Session is free on both nodes.
      assert.strictEqual(yield* onB(Effect.flatMap(SessionLocks, (l) => l.tryWithLock("s-2", Effect.succeed("ran")))), "ran")

      const waiter = yield* onB(Effect.flatMap(SessionLocks, (l) => l.withLock("s-1", Effect.succeed("after")))).pipe(Effect.forkChild)
      // B's section waits in the database for A's lock.
      let waiting = 0
      for (let i = 0; i < 5_000 && waiting === 0; i++) waiting = yield* onA(waitingAdvisory)
      assert.strictEqual(waiting, 1)
      assert.isUndefined(waiter.pollUnsafe())
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual(yield* Fiber.join(waiter), "after")
      // Released on a failure too.
      const failed = yield* onA(Effect.flatMap(SessionLocks, (l) => l.withLock("s-1", Effect.fail("boom")))).pipe(Effect.exit)
      assert.isTrue(Exit.isFailure(failed))
      assert.strictEqual(yield* onB(Effect.flatMap(SessionLocks, (l) => l.tryWithLock("s-1", Effect.succeed("free")))), "free")
    }).pipe(Effect.provide(nodes)))

  it.effect("two nodes racing Turn starts on one Session leave exactly one Turn; every other start is turn_active", () =>
    Effect.gen(function* () {
      const sessions = Array.from({ length: 8 }, (_, i) => `s-race-${i}`)
      yield* onA(Effect.forEach(sessions, sessionRow, { discard: true }))
      const attempts = sessions.flatMap((s) =>
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? onA : onB)(Effect.result(start(s, `${s}-t${i}`)))))
      const results = yield* Effect.all(attempts, { concurrency: "unbounded" })
      const won = results.filter((r) => r._tag === "Success")
      assert.strictEqual(won.length, sessions.length)
      for (const r of results) {
        if (r._tag === "Failure") assert.strictEqual((r.failure as OperatorConflict).reason, "turn_active")
      }
      const rows = yield* onB(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql`SELECT session_id, count(*)::int AS n FROM turns GROUP BY session_id ORDER BY session_id`))
      assert.deepStrictEqual(rows.map((r) => [r.session_id, Number(r.n)]), sessions.map((s) => [s, 1]))
    }).pipe(Effect.provide(nodes)))

  it.effect("a start frees its start key only after its transaction ended: whoever gets the start key finds the session key free", () =>
    Effect.gen(function* () {
      // PostgreSQL frees a committing transaction's locks one lock partition at a time, waking waiters as it
      // goes: had the start key been freed by the same COMMIT, a start granted it could still find the session
      // key held (session_busy). Held right after COMMIT returned, the start key must still be held, the session
      // key already free.
      const committed = yield* Deferred.make<void>()
      const proceed = yield* Deferred.make<void>()
      const sql = yield* onA(SqlClient.SqlClient)
      const gated = withLockConnections(sql, (real) =>
        Effect.tap(real, () => Effect.andThen(Deferred.succeed(committed, undefined), Deferred.await(proceed))))
      const locks = SessionLocks.make(DatabaseSessionLocks.databaseLock(gated, Semaphore.makeUnsafe(1)))
      const section = yield* locks.forStart("s-order", Effect.succeed("started")).pipe(Effect.forkChild)
      yield* Deferred.await(committed)
      const between = yield* onB(freeKeys("s-order")).pipe(Effect.ensuring(Deferred.succeed(proceed, undefined)))
      assert.deepStrictEqual(between, { session: true, start: false })
      assert.strictEqual(yield* Fiber.join(section), "started")
      assert.deepStrictEqual(yield* onB(freeKeys("s-order")), { session: true, start: true })
    }).pipe(Effect.provide(nodes)))

  it.effect("a lock connection whose COMMIT fails never goes back to the pool holding the Session's keys", () =>
    Effect.gen(function* () {
      const sql = yield* onA(SqlClient.SqlClient)
      // COMMIT fails without reaching the server: the lock transaction is still open with both keys.
      const failing = withLockConnections(sql, () =>
        Effect.fail(new SqlError.SqlError({ reason: new SqlError.UnknownError({ cause: new Error("lost"), message: "lost", operation: "commit" }) })))
      const locks = SessionLocks.make(DatabaseSessionLocks.databaseLock(failing, Semaphore.makeUnsafe(1)))
      assert.strictEqual(yield* locks.forStart("s-lost", Effect.succeed("started")), "started")
      // Another node can take both keys, and a start there runs.
      assert.strictEqual(yield* onB(bothKeysTaken("s-lost")), "taken")
      assert.strictEqual(yield* onB(Effect.flatMap(SessionLocks, (l) => l.forStart("s-lost", Effect.succeed("next")))), "next")
    }).pipe(Effect.provide(nodes)))
})
