/**
 * The dev Core's embedded store: SQLite through `node:sqlite` in `<data dir>/agentwire.db` (docs/store.md),
 * migrated on open. The layer provides `SqlClient` and the repositories (devices and credentials,
 * Sessions, Turns); its scope owns the database handle.
 */
import { Effect, Layer, Schema } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { chmodSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { DeviceCredentials } from "../DeviceCredentials.js"
import { DevIds } from "./DevIds.js"
import * as DeviceStore from "./DeviceStore.js"
import { migrate } from "./Migrations.js"
import * as SessionStore from "./SessionStore.js"
import * as NodeSqliteClient from "./sqlite/NodeSqliteClient.js"
import * as TurnStore from "./TurnStore.js"

/** The database file inside a data directory. */
export const databaseFile = (dataDir: string): string => join(dataDir, "agentwire.db")

/** The store could not be opened: nothing was read or written. */
export class StoreOpenFailed extends Schema.TaggedError<StoreOpenFailed>()("StoreOpenFailed", {
  path: Schema.String,
  stage: Schema.Literals(["data_dir", "open", "migrate"]),
  detail: Schema.String
}) {
  override get message() {
    return `cannot open the store at ${this.path} (${this.stage}): ${this.detail}`
  }
}

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

/** The SQL client on `filename`, with every pending migration applied. */
export const sqlLayer = (filename: string): Layer.Layer<SqlClient.SqlClient, StoreOpenFailed> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.gen(function* () {
      const client = yield* NodeSqliteClient.make({ filename }).pipe(
        Effect.mapError((e) => new StoreOpenFailed({ path: filename, stage: "open", detail: e.message }))
      )
      yield* migrate.pipe(
        Effect.provideService(SqlClient.SqlClient, client),
        Effect.mapError((e) => new StoreOpenFailed({ path: filename, stage: "migrate", detail: e.message }))
      )
      return client
    })
  ).pipe(Layer.provide(Reactivity.layer))

export type StoreServices =
  | SqlClient.SqlClient
  | DeviceStore.DeviceStore
  | DeviceCredentials
  | SessionStore.SessionStore
  | TurnStore.TurnStore

/** Every repository over a migrated database at `filename` (`:memory:` for tests). Needs `DevIds`. */
export const layerFile = (filename: string): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> =>
  Layer.mergeAll(
    DeviceStore.credentialsLayer.pipe(Layer.provideMerge(DeviceStore.layer)),
    SessionStore.layer,
    TurnStore.layer
  ).pipe(Layer.provideMerge(sqlLayer(filename)))

/** The store in a data directory (created with mode 0700 when missing). */
export const layerDataDir = (dataDir: string): Layer.Layer<StoreServices, StoreOpenFailed, DevIds> =>
  Layer.unwrap(Effect.as(ensureDataDir(dataDir), layerFile(databaseFile(dataDir))))
