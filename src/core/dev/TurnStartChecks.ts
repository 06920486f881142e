/**
 * A Turn start's two store checks in ONE statement (`TurnStore.startChecks`, issue 18: one store round trip,
 * not two): whether the Session has an unfinished (queued or running) Turn, and whether any of its Turns was
 * ever dispatched. Each is an index probe (`turns_by_session_status`, `turns_by_session_dispatched`), however
 * many Turns the Session has; the same SQL runs on SQLite and PostgreSQL.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { type StoreFailed, storeFailed } from "./StoreErrors.js"

export interface StartChecks {
  readonly unfinished: boolean
  readonly dispatched: boolean
}

/** SQLite answers 0 / 1, PostgreSQL false / true. */
const truthy = (value: unknown): boolean => Number(value ?? 0) === 1

export const startChecks = (sql: SqlClient.SqlClient) => (sessionId: string): Effect.Effect<StartChecks, StoreFailed> =>
  sql`SELECT
      EXISTS (SELECT 1 FROM turns WHERE session_id = ${sessionId} AND status IN ('queued', 'running')) AS unfinished,
      EXISTS (SELECT 1 FROM turns WHERE session_id = ${sessionId} AND dispatched_at_ms IS NOT NULL) AS dispatched`.pipe(
    Effect.map((rows) => ({ unfinished: truthy(rows[0]?.unfinished), dispatched: truthy(rows[0]?.dispatched) })),
    storeFailed("list_turns")
  )
