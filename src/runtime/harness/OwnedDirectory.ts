/**
 * A directory an Executor owns until its removal is confirmed: a Harness's scratch working directory or a
 * per-Executor home (protocol "Failures, retries and cleanup": a cleanup failure keeps ownership and reports
 * unconfirmed cleanup). Shared by the Claude Code and Codex adapters.
 *
 * The directory is created under `Effect.acquireRelease` in the preparation's Scope (the Executor's own scope)
 * and recorded in `Ownership` as `resource` (kind `executor`, e.g. `scratch:<executor id>`). Two paths remove it:
 * - `remove`: one typed attempt (`CloseFailed`) for the Executor's confirmed close. The Runtime retries that close
 *   (`closeUntilConfirmed` on the Executor) and reports its failed attempts as the Executor's
 *   `cleanup_unconfirmed`.
 * - the release, when the scope closes without a confirmed removal (a failed or interrupted preparation):
 *   `closeUntilConfirmed` on the directory's own resource. Each failed attempt is recorded (the Executor table's
 *   `Ownership` also reports it as the Executor's unconfirmed cleanup) and retried with the policy's backoff;
 *   never a defect, never a silent leak. After a confirmed removal the release only drops the record.
 *
 * Removal is the async `fs.rm` (recursive, force): a scratch tree can be large, and removing it must not block
 * the event loop that serves every other Executor and the connection.
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs/promises"
import { closeUntilConfirmed, Ownership } from "../Ownership.js"
import { RuntimePolicy } from "../RuntimePolicy.js"
import { CloseFailed } from "./Harness.js"

/** Removes a directory tree; resolves when it is gone (or was never there). Tests inject a failing one. */
export type RemoveDirectory = (path: string) => Promise<void>

export const removeRecursively: RemoveDirectory = (path) => Fs.rm(path, { recursive: true, force: true })

export interface OwnedDirectory {
  readonly path: string
  /** One removal attempt; a no-op once a removal succeeded. */
  readonly remove: Effect.Effect<void, CloseFailed>
}

export interface OwnedDirectoryOptions<E> {
  /** The `Ownership` record, e.g. `scratch:<executor id>`. */
  readonly resource: string
  /** What it is, for the failure text ("the scratch directory"). */
  readonly label: string
  /** Creates the directory and returns its path. */
  readonly create: Effect.Effect<string, E>
  readonly removeDirectory?: RemoveDirectory | undefined
}

/** The error code of a failed removal (never the message: it repeats the path). */
const codeOf = (error: unknown): string => {
  const code = typeof error === "object" && error !== null ? (error as { readonly code?: unknown }).code : undefined
  return typeof code === "string" ? ` (${code})` : ""
}

/** Creates a directory owned by the current Scope until its removal is confirmed (see the module comment). */
export const ownedDirectory = <E>(
  options: OwnedDirectoryOptions<E>
): Effect.Effect<OwnedDirectory, E, Scope.Scope | Ownership | RuntimePolicy> =>
  Effect.gen(function* () {
    const ownership = yield* Ownership
    const policy = yield* RuntimePolicy
    const { resource, label } = options
    const removeDirectory = options.removeDirectory ?? removeRecursively
    let removed = false
    const removeAt = (path: string): Effect.Effect<void, CloseFailed> =>
      Effect.suspend(() =>
        removed ? Effect.void : Effect.tryPromise({
          try: () => removeDirectory(path),
          catch: (e) => new CloseFailed({ reason: `cannot remove ${label}${codeOf(e)}` })
        }).pipe(Effect.andThen(Effect.sync(() => {
          removed = true
        })))
      )
    const path = yield* Effect.acquireRelease(
      Effect.tap(options.create, () => ownership.acquire(resource, "executor")),
      (path) =>
        Effect.suspend(() =>
          removed ? ownership.confirmed(resource) : closeUntilConfirmed(resource, removeAt(path), (e) => e.reason)
        ).pipe(Effect.provideService(Ownership, ownership), Effect.provideService(RuntimePolicy, policy))
    )
    return { path, remove: removeAt(path) }
  })
