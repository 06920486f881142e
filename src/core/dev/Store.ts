/**
 * The dev Core's store (docs/store.md): by default SQLite through `node:sqlite` in `<data dir>/agentwire.db`, its
 * connection on a worker thread (`sqlite/WorkerSqliteClient.ts`, so no statement runs on the event loop);
 * with a `postgres://` database URL, PostgreSQL (`pg/PgStore.ts`, docs/multi-node.md). Either is migrated
 * on open with the same migrations, and the same repositories (devices and credentials, Sessions, Turns)
 * run over it. The layer's scope owns the database handle or pool.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { chmodSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { DeviceCredentials } from "../DeviceCredentials.js"
import { DevIds } from "./DevIds.js"
import * as DeviceStore from "./DeviceStore.js"
import { migrate } from "./Migrations.js"
import * as SessionStore from "./SessionStore.js"
import * as PgStore from "./pg/PgStore.js"
import { SqlBatch } from "./SqlBatch.js"
import * as NodeSqliteClient from "./sqlite/NodeSqliteClient.js"
import * as WorkerSqliteClient from "./sqlite/WorkerSqliteClient.js"
import { StoreOpenFailed } from "./StoreErrors.js"

export { StoreOpenFailed } from "./StoreErrors.js"
import * as TurnStore from "./TurnStore.js"

/** The database file inside a data directory. */
export const databaseFile = (dataDir: string): string => join(dataDir, "agentwire.db")

/** Creates the data directory (mode 0700) when missing. */
export const ensureDataDir = (dataDir: string): Effect.Effect<void, StoreOpenFailed> =>
  Effect.try({
    try: () => {
      mkdirSync(dataDir, { recursive: true, mode: 0o700 })
      chmodSync(dataDir, 0o700)
    },
    catch: (cause) =>
      new StoreOpenFailed({ path: dataDir, stage: "data_dir", detail: cause instanceof Error ? cause.message : "unknown" })
  })

/** How SQLite commits reach the disk (`full`, the default: every commit fsynced; docs/store.md "Durability"). */
export type Durability = NodeSqliteClient.Durability

/**
 * Where the SQLite connection runs (docs/store.md "Off the event loop"): `worker` (the default) on its own worker
 * thread, every statement a message; `in-thread` on the caller's thread with synchronous calls (the
 * deterministic simulator, whose schedule must not depend on another thread).
 */
export type SqliteDriver = "worker" | "in-thread"

/** The SQL client on `filename`, with every pending migration applied (and `SqlBatch` with the worker driver). */
export const sqlLayer = (
  filename: string,
  durability?: Durability,
  driver: SqliteDriver = "worker"
): Layer.Layer<SqlClient.SqlClient | SqlBatch, StoreOpenFailed> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const options = { filename, ...(durability === undefined ? {} : { durability }) }
      const opened = driver === "worker"
        ? WorkerSqliteClient.make(options).pipe(Effect.map(({ batch, client }) => ({ client, batch: Option.some(batch) })))
        : NodeSqliteClient.make(options).pipe(Effect.map((client) => ({ client, batch: Option.none<SqlBatch["Service"]>() })))
      const { batch, client } = yield* opened.pipe(
        Effect.mapError((e) => new StoreOpenFailed({ path: filename, stage: "open", detail: e.message }))
      )
      yield* migrate.pipe(
        Effect.provideService(SqlClient.SqlClient, client),
        Effect.mapError((e) => new StoreOpenFailed({ path: filename, stage: "migrate", detail: e.message }))
      )
      const context = Context.make(SqlClient.SqlClient, client)
      return Option.match(batch, {
        onNone: () => context as Context.Context<SqlClient.SqlClient | SqlBatch>,
        onSome: (b) => Context.add(context, SqlBatch, b)
      })
    })
  ).pipe(Layer.provide(Reactivity.layer))

export type StoreServices =
  | SqlClient.SqlClient
  | DeviceStore.DeviceStore
  | DeviceCredentials
  | SessionStore.SessionStore
  | TurnStore.TurnStore

/** Every repository over a migrated `SqlClient` (any dialect the migrations support). Needs `DevIds`. */
export const layerSql = <E>(
  sql: Layer.Layer<SqlClient.SqlClient, E>
): Layer.Layer<StoreServices, E, DevIds> =>
  Layer.mergeAll(
    DeviceStore.credentialsLayer.pipe(Layer.provideMerge(DeviceStore.layer)),
    SessionStore.layer,
    TurnStore.layer
  ).pipe(Layer.provideMerge(sql))

/** Every repository over a migrated database at `filename` (`:memory:` for tests). Needs `DevIds`. */
export const layerFile = (
  filename: string,
  durability?: Durability,
  driver?: SqliteDriver
): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> => layerSql(sqlLayer(filename, durability, driver))

/** Every repository over a migrated PostgreSQL database (docs/multi-node.md). Needs `DevIds`. */
export const layerPostgres = (options: PgStore.PgStoreOptions): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> =>
  layerSql(PgStore.sqlLayer(options))

/** The store in a data directory (created with mode 0700 when missing). */
export const layerDataDir = (dataDir: string, durability?: Durability): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> =>
  Layer.unwrap(Effect.as(ensureDataDir(dataDir), layerFile(databaseFile(dataDir), durability)))

/**
 * Where Core keeps its records: the data directory's SQLite file (the zero-setup default), or a
 * PostgreSQL database (`--database postgres://…`, `AGENTWIRE_CORE_DATABASE`).
 */
export type StoreLocation =
  | { readonly _tag: "sqlite"; readonly dataDir: string; readonly durability?: Durability }
  | { readonly _tag: "postgres"; readonly url: Redacted.Redacted<string>; readonly schema?: string }

/** The store at `location`. */
export const layer = (location: StoreLocation): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> =>
  location._tag === "sqlite"
    ? layerDataDir(location.dataDir, location.durability)
    : layerPostgres({ url: location.url, ...(location.schema === undefined ? {} : { schema: location.schema }) })

/** The store's location as it may be printed: the file, or the database URL without its password. */
export const describeLocation = (location: StoreLocation): string =>
  location._tag === "sqlite" ? databaseFile(location.dataDir) : PgStore.describeDatabaseUrl(Redacted.value(location.url))
