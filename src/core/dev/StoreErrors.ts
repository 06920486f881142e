/**
 * Errors of the dev Core's store. A store failure decides nothing: the operation that needed it did not
 * happen (or, for a write inside a transaction, was rolled back). The SQL error's kind and SQLite's message
 * (never parameters) are logged as a warning; they never reach an HTTP response.
 */
import { Effect, Schema } from "effect"
import type { SqlError } from "effect/sql"

/** A statement or transaction of `operation` failed; nothing was decided. */
export class StoreFailed extends Schema.TaggedError<StoreFailed>()("StoreFailed", {
  operation: Schema.String
}) {
  override get message() {
    return `store operation failed (${this.operation})`
  }
}

/** The store could not be opened: nothing was read or written. `path` is a file path or a
 * database URL described without its password (`describeDatabaseUrl`). */
export class StoreOpenFailed extends Schema.TaggedError<StoreOpenFailed>()("StoreOpenFailed", {
  path: Schema.String,
  stage: Schema.Literals(["data_dir", "open", "migrate"]),
  detail: Schema.String
}) {
  override get message() {
    return `cannot open the store at ${this.path} (${this.stage}): ${this.detail}`
  }
}

/** Maps an `SqlError` of one operation into `StoreFailed`, logging the SQL reason tag (never parameters). */
export const storeFailed = (operation: string) => <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>) =>
  effect.pipe(
    Effect.tapError((error) =>
      Effect.logWarning("store operation failed").pipe(
        Effect.annotateLogs({ operation, reason: error.reason._tag, detail: String(error.reason.message ?? "").slice(0, 200) })
      )
    ),
    Effect.mapError(() => new StoreFailed({ operation }))
  )

/** Reads an integer column written as BIGINT/INTEGER (SQLite gives numbers, PostgreSQL may give strings). */
export const toInt = (value: unknown): number => (typeof value === "number" ? value : Number(value))

/** Reads a nullable integer column. */
export const toIntOrUndefined = (value: unknown): number | undefined =>
  value === null || value === undefined ? undefined : toInt(value)

/** Reads a BOOLEAN column (SQLite gives 0/1, PostgreSQL true/false); NULL stays undefined. */
export const toBool = (value: unknown): boolean | undefined =>
  value === null || value === undefined ? undefined : value === true || value === 1 || value === "1" || value === "t"

/** Reads a nullable TEXT column. */
export const toStringOrUndefined = (value: unknown): string | undefined =>
  value === null || value === undefined ? undefined : String(value)
