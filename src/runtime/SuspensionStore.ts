/**
 * The daemon's persisted suspension state (reference §8.1): the fencing identity of an accepted
 * `environment_quiesce` (`environment_id` + `suspend_id`) and the last accepted `environment_resume`. It is
 * process-level and, in the daemon, kept in `<profile>/suspension.json` (mode 0600, the profile directory is
 * 0700), so a suspension survives a process restart or a restore: after reconnecting, nothing is admitted until
 * the matching resume arrives as the first frame (Suspension.ts).
 *
 * The file is replaced atomically (a 0600 temporary file in the same directory, fsync, rename). It is read once
 * at daemon start (`load`); a file that cannot be read or does not decode stops the daemon with an operator
 * message instead of silently opening admission. Without a file (unit tests, scenarios) the state is kept in
 * memory for the process. The file holds only the two identities, never a credential or a payload.
 */
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Context, Effect, Layer, Option, Schema } from "effect"

/** One suspension identity: the bound Environment and the persisted attempt id. */
export const SuspensionIdentity = Schema.Struct({
  environment_id: Schema.String,
  suspend_id: Schema.String
})
export type SuspensionIdentity = typeof SuspensionIdentity.Type

/** What the daemon remembers across connections and restarts. */
export const PersistedSuspension = Schema.Struct({
  version: Schema.Literal(1),
  /** Set by an accepted quiesce; cleared by the matching resume. */
  suspended: Schema.NullOr(SuspensionIdentity),
  /** The last accepted resume: repeating it is answered `accepted` (reference §8.1 `not_suspended` rules). */
  last_resume: Schema.NullOr(SuspensionIdentity)
})
export type PersistedSuspension = typeof PersistedSuspension.Type

export const emptyState: PersistedSuspension = { version: 1, suspended: null, last_resume: null }

/** The state could not be read at start or written when it changed. The message names the file only. */
export class SuspensionStateFailed extends Schema.TaggedError<SuspensionStateFailed>()("SuspensionStateFailed", {
  path: Schema.String,
  operation: Schema.Literals(["read", "decode", "write"])
}) {
  override get message() {
    switch (this.operation) {
      case "read":
        return `cannot read the suspension state ${this.path}`
      case "decode":
        return `the suspension state ${this.path} is not valid; a suspended daemon must not reopen admission on a guess — inspect it (it names the Environment and suspend id) and remove it only if no suspension is in progress`
      case "write":
        return `cannot write the suspension state ${this.path}`
    }
  }
}

const decode = Schema.decodeUnknownOption(Schema.fromJsonString(PersistedSuspension))

/** Reads the state file; an absent file is the empty state. */
export const load = (path: string): Effect.Effect<PersistedSuspension, SuspensionStateFailed> =>
  Effect.tryPromise({
    try: () => Fs.readFile(path, "utf8").catch((e: NodeJS.ErrnoException) => (e.code === "ENOENT" ? undefined : Promise.reject(e))),
    catch: () => new SuspensionStateFailed({ path, operation: "read" })
  }).pipe(
    Effect.flatMap((text) =>
      text === undefined
        ? Effect.succeed(emptyState)
        : Option.match(decode(text), {
          onNone: () => Effect.fail(new SuspensionStateFailed({ path, operation: "decode" })),
          onSome: Effect.succeed
        }))
  )

/** Replaces the file atomically: a 0600 temporary file beside it, fsync, rename. */
const writeFile = (path: string, state: PersistedSuspension): Effect.Effect<void, SuspensionStateFailed> =>
  Effect.tryPromise({
    try: async () => {
      const temp = Path.join(Path.dirname(path), `.${Path.basename(path)}.${process.pid}.tmp`)
      const handle = await Fs.open(temp, "w", 0o600)
      try {
        await handle.writeFile(`${JSON.stringify(state)}\n`, "utf8")
        await handle.sync()
      } finally {
        await handle.close()
      }
      await Fs.rename(temp, path)
    },
    catch: () => new SuspensionStateFailed({ path, operation: "write" })
  })

export interface SuspensionStoreShape {
  readonly current: Effect.Effect<PersistedSuspension>
  /** Persists a new state; the in-memory state changes only once the write succeeded. */
  readonly set: (state: PersistedSuspension) => Effect.Effect<void, SuspensionStateFailed>
}

/** The process's suspension state, shared by every connection. */
export class SuspensionStore extends Context.Service<SuspensionStore, SuspensionStoreShape>()("agentwire/runtime/SuspensionStore") {
  /**
   * Kept in `file` (already read with `load`: `initial`), or in memory when `file` is undefined. `write`
   * replaces the file writer (tests inject a failing disk).
   */
  static readonly layer = (options: {
    readonly file?: string | undefined
    readonly initial?: PersistedSuspension | undefined
    readonly write?: ((path: string, state: PersistedSuspension) => Effect.Effect<void, SuspensionStateFailed>) | undefined
  } = {}): Layer.Layer<SuspensionStore> =>
    Layer.sync(SuspensionStore, () => {
      let state = options.initial ?? emptyState
      const file = options.file
      const write = options.write ?? writeFile
      return SuspensionStore.of({
        current: Effect.sync(() => state),
        set: (next) =>
          (file === undefined ? Effect.void : write(file, next)).pipe(Effect.andThen(Effect.sync(() => {
            state = next
          })))
      })
    })
}
