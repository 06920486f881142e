/**
 * What a Turn start reads under its locks, in ONE statement (`TurnStore.startChecks`, issue 18: one store round
 * trip, not three): the Session's row, whether the Session has an unfinished (queued or running) Turn, and
 * whether any of its Turns was ever dispatched. The two checks are index probes (`turns_by_session_status`,
 * `turns_by_session_dispatched`), however many Turns the Session has; the same SQL runs on SQLite and PostgreSQL.
 */
import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { readSession, type SessionRecord } from "./SessionStore.js"
import { type StoreFailed, storeFailed } from "./StoreErrors.js"

export interface StartChecks {
  /** The Session as `SessionStore.get` reads it; none when it does not exist (then both checks are false). */
  readonly session: Option.Option<SessionRecord>
  readonly unfinished: boolean
  readonly dispatched: boolean
}

/** SQLite answers 0 / 1, PostgreSQL false / true. */
const truthy = (value: unknown): boolean => Number(value ?? 0) === 1

export const startChecks = (sql: SqlClient.SqlClient) => (sessionId: string): Effect.Effect<StartChecks, StoreFailed> =>
  sql`SELECT s.*,
      EXISTS (SELECT 1 FROM turns WHERE session_id = s.session_id AND status IN ('queued', 'running')) AS start_unfinished,
      EXISTS (SELECT 1 FROM turns WHERE session_id = s.session_id AND dispatched_at_ms IS NOT NULL) AS start_dispatched
    FROM sessions s WHERE s.session_id = ${sessionId}`.pipe(
    Effect.map((rows) => {
      const row = rows[0]
      if (row === undefined) return { session: Option.none(), unfinished: false, dispatched: false }
      return { session: Option.some(readSession(row)), unfinished: truthy(row.start_unfinished), dispatched: truthy(row.start_dispatched) }
    }),
    storeFailed("get_session")
  )
