/**
 * The Core's data-directory lock (docs/operations.md "One Core per data directory"): at most one dev Core
 * serves a data directory. The lock is an exclusive SQLite lock on `<data dir>/core.lock` (a separate,
 * empty database held open with `locking_mode=EXCLUSIVE` inside `BEGIN EXCLUSIVE`): the operating system
 * releases it when the process ends, however it ends, so a crashed Core never leaves a stale lock, and no
 * process id is ever trusted.
 *
 * The lock is taken before the store is opened, so a second Core on the same data directory fails with
 * `DataDirLocked` before it reads, migrates or reconciles anything. Commands that only touch credentials
 * (`agentwire core credential …`) do not take it; they ask `probe` whether a Core is live and, if so, read the
 * address it published (`<data dir>/core.json`, written after the server is bound, removed at stop).
 */
import { Effect, Option, Schema, type Scope } from "effect"
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"

/** The lock file inside a data directory. */
export const lockFile = (dataDir: string): string => join(dataDir, "core.lock")

/** The address file a live Core publishes inside its data directory. */
export const addressFile = (dataDir: string): string => join(dataDir, "core.json")

/** Another live process holds the lock: nothing in the data directory was touched. */
export class DataDirLocked extends Schema.TaggedError<DataDirLocked>()("DataDirLocked", {
  dataDir: Schema.String,
  /** The URL the holder published, when it did. */
  url: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `another agentwire core is using the data directory ${this.dataDir}${
      this.url === undefined ? "" : ` (listening on ${this.url})`
    }; stop it or choose another --data-dir`
  }
}

/** The lock file could not be opened at all (permissions, not a file, …). */
export class DataDirLockFailed extends Schema.TaggedError<DataDirLockFailed>()("DataDirLockFailed", {
  path: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `cannot take the data-directory lock ${this.path}: ${this.detail}`
  }
}

/** What a live Core publishes about itself. */
export interface CoreAddress {
  readonly url: string
  readonly pid: number
}

const CoreAddressJson = Schema.fromJsonString(Schema.Struct({ url: Schema.String, pid: Schema.Int }))

const errorText = (cause: unknown) => (cause instanceof Error ? cause.message : "unknown")

const isBusy = (cause: unknown) => {
  const native = cause as { readonly errcode?: unknown; readonly message?: unknown }
  // SQLITE_BUSY (5) / SQLITE_LOCKED (6), or their text
  return native?.errcode === 5 || native?.errcode === 6 ||
    (typeof native?.message === "string" && /database is locked/i.test(native.message))
}

/** Tries the lock once: the open handle on success, `undefined` when another process holds it. */
const tryLock = (dataDir: string): Effect.Effect<DatabaseSync | undefined, DataDirLockFailed> =>
  Effect.try({
    try: () => {
      const db = new DatabaseSync(lockFile(dataDir), { timeout: 0 })
      try {
        db.exec("PRAGMA locking_mode=EXCLUSIVE")
        db.exec("BEGIN EXCLUSIVE")
        return db
      } catch (cause) {
        db.close()
        if (isBusy(cause)) return undefined
        throw cause
      }
    },
    catch: (cause) => new DataDirLockFailed({ path: lockFile(dataDir), detail: errorText(cause) })
  })

/** The address a live Core published, if it is readable. */
export const readAddress = (dataDir: string): Option.Option<CoreAddress> => {
  try {
    return Option.some(Schema.decodeUnknownSync(CoreAddressJson)(readFileSync(addressFile(dataDir), "utf8")))
  } catch {
    return Option.none()
  }
}

/**
 * Takes the lock for the current scope (the data directory must exist). Fails with `DataDirLocked` when
 * another process holds it; the scope's end releases it and removes the published address.
 */
export const acquire = (dataDir: string): Effect.Effect<void, DataDirLocked | DataDirLockFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.flatMap(tryLock(dataDir), (db) =>
      db === undefined
        ? Effect.fail(new DataDirLocked({ dataDir, ...Option.match(readAddress(dataDir), { onNone: () => ({}), onSome: (a) => ({ url: a.url }) }) }))
        : Effect.succeed(db)),
    (db) =>
      Effect.sync(() => {
        rmSync(addressFile(dataDir), { force: true })
        db.close()
      })
  ).pipe(Effect.asVoid)

/**
 * Whether a live Core holds the lock of `dataDir` right now (`Option.some` with its published address, which
 * may be missing while it starts). A free lock is taken and released at once; a missing lock file is not created.
 */
export const probe = (dataDir: string): Effect.Effect<Option.Option<Partial<CoreAddress>>, DataDirLockFailed> =>
  Effect.suspend(() => (existsSync(lockFile(dataDir)) ? tryLock(dataDir) : Effect.succeed(null))).pipe(Effect.map((db) => {
    if (db === null) return Option.none()
    if (db === undefined) return Option.some(Option.getOrElse(readAddress(dataDir), () => ({})))
    db.close()
    return Option.none()
  }))

/** Publishes the live Core's address (atomically, mode 0600) while the lock is held. */
export const writeAddress = (dataDir: string, address: CoreAddress): Effect.Effect<void, DataDirLockFailed> =>
  Effect.try({
    try: () => {
      const target = addressFile(dataDir)
      const temp = `${target}.${address.pid}.tmp`
      writeFileSync(temp, JSON.stringify(address) + "\n", { mode: 0o600 })
      renameSync(temp, target)
    },
    catch: (cause) => new DataDirLockFailed({ path: addressFile(dataDir), detail: errorText(cause) })
  })
