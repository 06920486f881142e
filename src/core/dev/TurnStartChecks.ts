/**
 * What a Turn start reads under its locks, in ONE statement (`TurnStore.startChecks`, issue 18: one store round
 * trip, not three): the Session's row, whether the Session has an unfinished (queued or running) Turn, and
 * whether any of its Turns was ever dispatched. The two checks are probes of partial indexes that hold only those
 * Turns (`turns_unfinished_by_session`, `turns_dispatched_by_session`, migration 11: each predicate below must stay
 * written as the index's), however many Turns the Session has; the same SQL runs on SQLite and PostgreSQL.
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

/**
 * What this process knows for certain a Session's start checks would answer (tturn2, issue 18: a start on a Session
 * whose previous Turn ran here reads nothing). Only for the embedded SQLite store on one node (`Turns.ts` decides):
 * the data directory's lock keeps every other process out, so the only writers of a Session's row and of its Turns'
 * status are this process's starts and settles. An entry is made only by a start that recorded its Turn (from checks
 * that said "none unfinished"), holding that Turn as `open`; it answers only once the settle of exactly that Turn
 * reported the terminal row it wrote (`settled`, with the row's dispatch mark and native Session id). Anything else
 * (a start that fails or is interrupted midway, a settle that wrote nothing, a Turn queued again) leaves no answer, and
 * the start reads the store as before.
 */
export interface StartCache {
  /** Takes the Session's entry out (a start that does not record its Turn leaves none); checks only when certain. */
  readonly take: (sessionId: string) => StartChecks | undefined
  /** A start recorded `turnId` from checks that said "none unfinished"; `session` as it is now (bound). */
  readonly started: (session: SessionRecord, dispatched: boolean, turnId: string) => void
  /** The settle of a Turn wrote this terminal row (with the Session's native id, in the same transaction). */
  readonly settled: (turn: { readonly turnId: string; readonly sessionId: string; readonly dispatchedAtMs: number | undefined; readonly nativeSessionId: string | undefined }) => void
}

interface CacheEntry {
  session: SessionRecord
  dispatched: boolean
  open: string | undefined
}

/** Sessions remembered at most (the least recently started is forgotten first; a forgotten one is read again). */
const maxEntries = 4096

export const makeStartCache = (): StartCache => {
  const entries = new Map<string, CacheEntry>()
  return {
    take: (sessionId) => {
      const entry = entries.get(sessionId)
      if (entry === undefined) return undefined
      entries.delete(sessionId)
      return entry.open === undefined ? { session: Option.some(entry.session), unfinished: false, dispatched: entry.dispatched } : undefined
    },
    started: (session, dispatched, turnId) => {
      entries.delete(session.sessionId)
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!)
      entries.set(session.sessionId, { session, dispatched, open: turnId })
    },
    settled: (turn) => {
      const entry = entries.get(turn.sessionId)
      if (entry === undefined || entry.open !== turn.turnId) return
      entry.open = undefined
      if (turn.dispatchedAtMs !== undefined) entry.dispatched = true
      // TurnSettle.ts writes the Session's native id with the outcome when the outcome carries a non-empty one.
      if (turn.nativeSessionId !== undefined && turn.nativeSessionId !== "") entry.session = { ...entry.session, nativeSessionId: turn.nativeSessionId }
    }
  }
}
