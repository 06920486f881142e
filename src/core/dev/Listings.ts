/**
 * Paging of the operator listings of devices and Sessions (docs/operator-api.md "Listings"): keyset paging
 * over `(created_at_ms, id)`, oldest first, on an index, so a page costs the same at 10 devices and at 10 000
 * and never repeats or skips a record created meanwhile. The cursor is opaque to clients (base64url of
 * `created_at_ms:id`, the same form as the Turn list's); a malformed one is a 400 that does not echo it.
 */
import { Effect, Option } from "effect"
import { OperatorRequestInvalid } from "./OperatorErrors.js"

export const DefaultPageSize = 50
export const MaxPageSize = 200

/** A position in listing order: the last record of the previous page. */
export interface PageKey {
  readonly createdAtMs: number
  readonly id: string
}

export interface PageQuery {
  readonly limit: number
  readonly after: Option.Option<PageKey>
}

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  /** Pass as `cursor` for the next page; `null` on the last page. */
  readonly nextCursor: string | null
}

export const encodeCursor = (key: PageKey): string => Buffer.from(`${key.createdAtMs}:${key.id}`, "utf8").toString("base64url")

const invalid = (detail: string) => new OperatorRequestInvalid({ detail })

/** `limit` (1 to 200, default 50) and `cursor` of a list request; every problem is a 400 that does not echo the value. */
export const parsePageQuery = (params: URLSearchParams): Effect.Effect<PageQuery, OperatorRequestInvalid> =>
  Effect.suspend(() => {
    const limitText = params.get("limit")
    const limit = limitText === null ? DefaultPageSize : Number(limitText)
    if (!Number.isInteger(limit) || limit < 1 || limit > MaxPageSize) {
      return Effect.fail(invalid(`limit must be an integer from 1 to ${MaxPageSize}`))
    }
    const cursorText = params.get("cursor")
    if (cursorText === null) return Effect.succeed({ limit, after: Option.none() })
    const decoded = cursorText.length <= 400 ? Buffer.from(cursorText, "base64url").toString("utf8") : ""
    const match = /^(\d{1,16}):(.{1,256})$/s.exec(decoded)
    if (match === null) return Effect.fail(invalid("cursor is not a cursor this API returned"))
    return Effect.succeed({ limit, after: Option.some({ createdAtMs: Number(match[1]), id: match[2]! }) })
  })

/**
 * Reads one page: `read` is asked for one record more than the page, to know whether another page follows;
 * `keyOf` gives a record's position for the next cursor.
 */
export const readPage = <A, E, R>(
  query: PageQuery,
  read: (after: Option.Option<PageKey>, limit: number) => Effect.Effect<ReadonlyArray<A>, E, R>,
  keyOf: (a: A) => PageKey
): Effect.Effect<Page<A>, E, R> =>
  Effect.map(read(query.after, query.limit + 1), (rows) => {
    const items = rows.slice(0, query.limit)
    const last = items[items.length - 1]
    return { items, nextCursor: rows.length > query.limit && last !== undefined ? encodeCursor(keyOf(last)) : null }
  })
