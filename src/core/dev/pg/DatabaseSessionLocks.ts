/**
 * The Session lock on several Core nodes (docs/multi-node.md "Database-level Session lock"): the in-process
 * lock of `SessionLocks` first (waiters on this node queue in memory, holding nothing), then a PostgreSQL
 * **transaction-scoped advisory lock** keyed by the schema and the Session id, held for the critical section.
 *
 * The advisory lock lives on its own reserved connection, in a transaction that only takes the lock
 * (`BEGIN; SELECT pg_[try_]advisory_xact_lock(k)`) and ends (`COMMIT`) when the critical section exits; the
 * section's own statements run on the pool as before (never inside that transaction, so a runner forked in the
 * section never writes on it). A node that dies releases its locks with its connections.
 *
 * - Taken only by the node that runs the section: a routed Turn start or Files operation is routed before any
 *   lock is taken (Turns.ts, pg/RoutedFiles.ts), so no lock is ever held across a wait on another node.
 * - At most `slots` lock connections at once (default 3 of the pool's 10), so the holders never take every
 *   pooled connection their own statements need; a section beyond that waits in memory for a slot.
 * - `tryWithLock` uses `pg_try_advisory_xact_lock`: held by another node → `OperatorConflict{session_busy}`,
 *   exactly as when held on this node. A Turn start (`forStart`) first waits for the Session's **start** lock
 *   (a second key), so two nodes starting on one Session serialize as two starts on one node do: the second
 *   sees the first's Turn and is refused `turn_active`.
 * - The start key is a **session-level** advisory lock, released (`pg_advisory_unlock`) only after `COMMIT`
 *   returned. PostgreSQL does not release a transaction's locks atomically: `COMMIT` frees them one lock
 *   partition at a time and wakes each lock's waiters as it goes, so a start waiting for the start key could be
 *   granted it while the same transaction's session key was still held, and be refused `session_busy` although
 *   no Files operation ran (seen under load). `COMMIT` returns only after every lock of its transaction is
 *   free, so a start key freed after it proves the session key free.
 * - The lock connection goes back to the pool holding nothing: when the transaction's end or the unlock fails,
 *   the connection ends its own backend (`pg_terminate_backend(pg_backend_pid())`: PostgreSQL drops every lock
 *   of a backend that exits) and the pool replaces it.
 *
 * Keys are `hashtextextended(schema || '/session/' (or '/start/') || session id, 0)`: advisory locks are per
 * database, the schema (an identifier, no '/') keeps two stores of one database apart. A hash collision only
 * serializes two Sessions.
 */
import { Effect, Layer, Semaphore } from "effect"
import { SqlClient, type SqlConnection } from "effect/sql"
import { OperatorConflict, OperatorUnavailable } from "../OperatorErrors.js"
import { type InnerSessionLock, type LockMode, SessionLocks } from "../SessionLocks.js"

export interface DatabaseSessionLocksOptions {
  /** Lock connections held at once (default 3). */
  readonly slots?: number
}

const lockFailed = () => new OperatorUnavailable({ operation: "session_lock" })

const key = (what: string) => `hashtextextended(current_schema() || '/${what}/' || $1, 0)`
const WaitSession = `SELECT true AS got, pg_advisory_xact_lock(${key("session")})`
const TrySession = `SELECT pg_try_advisory_xact_lock(${key("session")}) AS got`
const WaitStart = `SELECT pg_advisory_lock(${key("start")})`
const FreeStart = `SELECT pg_advisory_unlock(${key("start")})`
const EndBackend = "SELECT pg_terminate_backend(pg_backend_pid())"

/**
 * Ends the lock transaction (every lock of it is free when `COMMIT` returns), then frees a start's
 * session-level start key. Either failing leaves the connection's locks unknown: it ends its own backend, so it
 * never returns to the pool holding a lock (its own error — the backend went away — is the expected outcome).
 */
const release = (conn: SqlConnection.Connection, sessionId: string, mode: LockMode) =>
  Effect.gen(function* () {
    yield* conn.executeUnprepared("COMMIT", [], undefined)
    if (mode === "start") yield* conn.execute(FreeStart, [sessionId], undefined)
  }).pipe(Effect.catch(() => Effect.ignore(conn.executeUnprepared(EndBackend, [], undefined))))

/** The database lock, taken inside the in-process ones, on a reserved connection of its own. */
export const databaseLock = (sql: SqlClient.SqlClient, slots: Semaphore.Semaphore): InnerSessionLock =>
  (sessionId, mode, effect) =>
    slots.withPermits(1)(Effect.scoped(Effect.gen(function* () {
      const conn = yield* Effect.mapError(sql.reserve, lockFailed)
      const run = (statement: string) => Effect.mapError(conn.execute(statement, [sessionId], undefined), lockFailed)
      yield* Effect.acquireRelease(
        Effect.mapError(conn.executeUnprepared("BEGIN", [], undefined), lockFailed),
        () => release(conn, sessionId, mode)
      )
      if (mode === "start") yield* run(WaitStart)
      const rows = yield* run(mode === "wait" ? WaitSession : TrySession)
      const got = (rows[0] as { readonly got?: unknown } | undefined)?.got
      if (got !== true && got !== "t") {
        return yield* new OperatorConflict({ reason: "session_busy", detail: "a Files operation holds the Session" })
      }
      return yield* effect
    })))

/** `SessionLocks` for a PostgreSQL store: the in-process lock, then the database lock. */
export const layer = (
  options: DatabaseSessionLocksOptions = {}
): Layer.Layer<SessionLocks, never, SqlClient.SqlClient> =>
  Layer.effect(
    SessionLocks,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return SessionLocks.make(databaseLock(sql, Semaphore.makeUnsafe(Math.max(1, options.slots ?? 3))))
    })
  )
