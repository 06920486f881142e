/**
 * `GET /api/v1/operator/turns`: Turns newest first, one page at a time (docs/operator-api.md "List Turns").
 *
 * Keyset paging over `(created_at_ms, turn_id)`: the cursor names the last Turn of a page, so a page never
 * repeats or skips a Turn when new ones arrive meanwhile. The cursor is opaque to clients (base64url of
 * `created_at_ms:turn_id`); a malformed one is a 400, never an echo. Filters: `status`, `session_id`,
 * `device_id`. Each page reads ids first, then the stored records through `TurnStore.get`.
 */
import { Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"
import { TurnStore, type TurnStatus } from "./TurnStore.js"
import { type TurnView, turnView } from "./Turns.js"

export const DefaultPageSize = 50
export const MaxPageSize = 200

const Statuses: ReadonlyArray<TurnStatus> = ["queued", "running", "completed", "failed", "cancelled"]

export interface TurnListQuery {
  readonly limit: number
  readonly cursor: Option.Option<{ readonly createdAtMs: number; readonly turnId: string }>
  readonly status: Option.Option<TurnStatus>
  readonly sessionId: Option.Option<string>
  readonly deviceId: Option.Option<string>
}

export interface TurnPage {
  readonly turns: ReadonlyArray<TurnView>
  /** Pass as `cursor` for the next page; `null` on the last page. */
  readonly next_cursor: string | null
}

const encodeCursor = (createdAtMs: number, turnId: string) =>
  Buffer.from(`${createdAtMs}:${turnId}`, "utf8").toString("base64url")

const invalid = (detail: string) => new OperatorRequestInvalid({ detail })

const IdText = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))

/** Parses the query string of a list request; every problem is a 400 that does not echo the value. */
export const parseQuery = (params: URLSearchParams): Effect.Effect<TurnListQuery, OperatorRequestInvalid> =>
  Effect.gen(function* () {
    const limitText = params.get("limit")
    const limit = limitText === null ? DefaultPageSize : Number(limitText)
    if (!Number.isInteger(limit) || limit < 1 || limit > MaxPageSize) {
      return yield* invalid(`limit must be an integer from 1 to ${MaxPageSize}`)
    }
    const cursorText = params.get("cursor")
    let cursor: TurnListQuery["cursor"] = Option.none()
    if (cursorText !== null) {
      const decoded = cursorText.length <= 400 ? Buffer.from(cursorText, "base64url").toString("utf8") : ""
      const match = /^(\d{1,16}):(.{1,128})$/s.exec(decoded)
      if (match === null) return yield* invalid("cursor is not a cursor this API returned")
      cursor = Option.some({ createdAtMs: Number(match[1]), turnId: match[2]! })
    }
    const statusText = params.get("status")
    if (statusText !== null && !Statuses.includes(statusText as TurnStatus)) {
      return yield* invalid(`status must be one of ${Statuses.join(", ")}`)
    }
    const id = (name: string) => {
      const value = params.get(name)
      if (value === null) return Effect.succeed(Option.none<string>())
      return Schema.is(IdText)(value) ? Effect.succeed(Option.some(value)) : Effect.fail(invalid(`${name} must be 1 to 128 characters`))
    }
    return {
      limit,
      cursor,
      status: statusText === null ? Option.none() : Option.some(statusText as TurnStatus),
      sessionId: yield* id("session_id"),
      deviceId: yield* id("device_id")
    }
  })

/** One page of Turns, newest first. */
export const listPage = (query: TurnListQuery): Effect.Effect<TurnPage, OperatorUnavailable, SqlClient.SqlClient | TurnStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* TurnStore
    const conditions = [
      ...Option.match(query.cursor, {
        onNone: () => [],
        onSome: (c) => [sql`(created_at_ms < ${c.createdAtMs} OR (created_at_ms = ${c.createdAtMs} AND turn_id < ${c.turnId}))`]
      }),
      ...Option.match(query.status, { onNone: () => [], onSome: (s) => [sql`status = ${s}`] }),
      ...Option.match(query.sessionId, { onNone: () => [], onSome: (s) => [sql`session_id = ${s}`] }),
      ...Option.match(query.deviceId, { onNone: () => [], onSome: (d) => [sql`device_id = ${d}`] })
    ]
    // one more than the page, to know whether another page follows
    const rows = yield* sql`SELECT turn_id FROM turns ${conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`}
      ORDER BY created_at_ms DESC, turn_id DESC LIMIT ${query.limit + 1}`.pipe(
      Effect.mapError(() => new OperatorUnavailable({ operation: "list_turns" }))
    )
    const ids = rows.slice(0, query.limit).map((row) => String(row.turn_id))
    const turns: Array<TurnView> = []
    for (const id of ids) {
      const record = yield* store.get(id).pipe(Effect.mapError(() => new OperatorUnavailable({ operation: "list_turns" })))
      if (Option.isSome(record)) turns.push(turnView(record.value))
    }
    const last = turns[turns.length - 1]
    return {
      turns,
      next_cursor: rows.length > query.limit && last !== undefined ? encodeCursor(last.created_at_ms, last.turn_id) : null
    }
  })
