/**
 * The dev Core's store on PostgreSQL (docs/store.md, docs/multi-node.md): an `effect/sql` `SqlClient` from
 * `@effect/sql-pg` (its own wire-protocol client, no native addon), migrated on open with the same portable
 * migrations as the SQLite store. Every repository above it is the same code.
 *
 * The database URL may carry a password (in the user info or a `password` query parameter). It stays
 * `Redacted` until the driver reads it; everything this module shows — errors, the store's description —
 * uses `describeDatabaseUrl`, which keeps only the scheme, user, host, port and database name.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { migrate } from "../Migrations.js"
import { StoreOpenFailed } from "../StoreErrors.js"

export interface PgStoreOptions {
  /** A libpq URI: `postgres://user[:password]@host[:port]/database[?…]`. */
  readonly url: Redacted.Redacted<string>
  /**
   * The schema every statement uses (PostgreSQL `search_path`); it must exist. Default: the server's
   * default (`public`). Tests give each test its own.
   */
  readonly schema?: string
  /** Pool size (default 10). */
  readonly maxConnections?: number
}

/** Whether `value` names a PostgreSQL database (`postgres://` or `postgresql://`). */
export const isDatabaseUrl = (value: string): boolean => /^postgres(ql)?:\/\//i.test(value.trim())

/** Whether `url` carries a password (in the user info or a `password` query parameter). */
export const hasPassword = (url: string): boolean => {
  try {
    const parsed = new URL(url.trim())
    return parsed.password !== "" || parsed.searchParams.has("password")
  } catch {
    return false
  }
}

/**
 * A description of a database URL that is safe to print: scheme, user, host, port and database only. The
 * password and every query parameter (which may carry `password=`) are dropped; a URL that does not parse
 * is described as such, never echoed.
 */
export const describeDatabaseUrl = (url: string): string => {
  let parsed: URL
  try {
    parsed = new URL(url.trim())
  } catch {
    return "<unparsable database URL>"
  }
  const user = parsed.username === "" ? "" : `${parsed.username.slice(0, 64)}${parsed.password === "" ? "" : ":***"}@`
  const port = parsed.port === "" ? "" : `:${parsed.port}`
  return `${parsed.protocol}//${user}${parsed.hostname.slice(0, 255)}${port}${parsed.pathname.slice(0, 128)}`
}

/** Removes every secret of `url` (the password, every query value) from a driver's message. */
const scrub = (url: string, text: string): string => {
  const secrets: Array<string> = []
  try {
    const parsed = new URL(url.trim())
    if (parsed.password !== "") secrets.push(parsed.password, decodeURIComponent(parsed.password))
    for (const [, value] of parsed.searchParams) if (value !== "") secrets.push(value)
  } catch {
    secrets.push(url)
  }
  let out = text.split(url).join("<database URL>")
  for (const secret of secrets) if (secret.length > 0) out = out.split(secret).join("***")
  return out.slice(0, 300)
}

const PgIdentifier = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * The PostgreSQL client on `options.url`, with every pending migration applied. Success proves the server
 * answered, authenticated us and holds the latest schema; the pool belongs to the layer's scope. Fails
 * with `StoreOpenFailed` (stage `open` or `migrate`) whose text never holds the password.
 */
export const sqlLayer = (
  options: PgStoreOptions
): Layer.Layer<SqlClient.SqlClient | PgClient.PgClient, StoreOpenFailed> => {
  const raw = Redacted.value(options.url)
  const path = describeDatabaseUrl(raw)
  const failed = (stage: "open" | "migrate") => (e: { readonly message: string }) =>
    new StoreOpenFailed({ path, stage, detail: scrub(raw, e.message) })
  return Layer.unwrap(Effect.gen(function* () {
    if (options.schema !== undefined && !PgIdentifier.test(options.schema)) {
      return yield* new StoreOpenFailed({ path, stage: "open", detail: "the schema must be a lower-case SQL identifier" })
    }
    const client = PgClient.layerFrom(
      PgClient.make({
        url: options.url,
        maxConnections: options.maxConnections ?? 10,
        applicationName: "agentwire-core",
        ...(options.schema === undefined ? {} : { startupParameters: { search_path: options.schema } })
      }).pipe(Effect.mapError(failed("open")))
    )
    const migrated = Layer.effectDiscard(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        // Prove the connection (and the credentials) before migrating, so the two failures read differently.
        yield* sql`SELECT 1`.pipe(Effect.mapError(failed("open")))
        yield* migrate.pipe(Effect.mapError(failed("migrate")))
      })
    )
    return migrated.pipe(Layer.provideMerge(client))
  }))
}
