/**
 * The daemon's own workspace implementation, process-level (protocol "Workspace operations": every platform uses
 * the daemon's implementation for bounded reads, directory listing, file creation and output export, with no
 * external helper or staging directory). Native handles are explicit values with an idempotent `close`, so the
 * families can own them in Scopes, try the close once to decide their reply, and leave an unconfirmed close to
 * `closeUntilConfirmed`.
 *
 * Every path goes through `internal/safeFs.ts` (grammar, openat-style resolution, no final-component symlink, no
 * special or hard-linked file). Refusals are `SafeFsReason`s; nothing carries an errno text or a path.
 */
import type * as FsP from "node:fs/promises"
import { Context, Effect, Layer, Option } from "effect"
import { ExportStream, ExportTooLarge } from "./internal/exportStream.js"
import {
  createStaging,
  DestinationRefused,
  type DestinationIssue,
  discardStaging,
  openDirectoryForList,
  openFileForRead,
  readPrefix,
  renameStaging,
  SafeFsError,
  type SafeFsReason,
  syncStaging,
  syncStagingDirectory
} from "./internal/safeFs.js"
import { listDirectory, type ListedEntry } from "./internal/safeListing.js"
import { writeAllSync } from "./internal/stagingWrite.js"

/** A native handle's close: idempotent (every caller shares the first attempt's outcome once it succeeded). */
export type NativeClose = Effect.Effect<void, SafeFsReason>

export interface NativeFile {
  readonly size: number
  /** Up to `max` bytes from the start; `more` when the file had more. */
  readonly readPrefix: (max: number) => Effect.Effect<{ readonly bytes: Uint8Array; readonly more: boolean }, SafeFsReason>
  readonly close: NativeClose
}

export interface NativeDirectory {
  readonly list: (max: number) => Effect.Effect<{ readonly entries: ReadonlyArray<ListedEntry>; readonly truncated: boolean }, SafeFsReason>
  readonly close: NativeClose
}

/** Why an export's read failed: a filesystem reason, or the 500 MiB file-data allowance. */
export type ExportReadFailure = SafeFsReason | "too_large"

export interface NativeExport {
  /** The next ≤ `max` tar bytes of the workspace; `null` after the end-of-archive marker. */
  readonly read: (max: number) => Effect.Effect<Uint8Array | null, ExportReadFailure>
  readonly close: NativeClose
}

/** Why a write's staging file could not be created or installed: a filesystem reason or a destination refusal. */
export type StagingFailure = SafeFsReason | DestinationIssue

/**
 * A write's staging file beside its destination (verified inside the root), installed in three steps so the
 * caller knows exactly which step failed: a failure before `rename` leaves the old file intact; a failure of
 * `syncDirectory` comes after the rename (the outcome is ambiguous).
 */
export interface NativeStaging {
  /** Writes all of `data` at `offset`, synchronously (`safeFs.writeAllSync`; no progress is `io`). */
  readonly write: (data: Uint8Array, offset: number) => Effect.Effect<void, SafeFsReason>
  /** fsync and close of the complete staging file. */
  readonly sync: Effect.Effect<void, SafeFsReason>
  /** Re-checks the destination, copies its mode and renames the staging file over it (atomic). */
  readonly rename: Effect.Effect<void, StagingFailure>
  /** fsync of the destination's directory: the durability of the rename. */
  readonly syncDirectory: Effect.Effect<void, SafeFsReason>
  /** Removes the staging file (already gone is fine) and closes its handles; retryable until it succeeds. */
  readonly discard: NativeClose
}

/**
 * The install of a complete staging file (the same for `workspace_write` and a `runtime_prepare` file): sync,
 * rename over the destination, sync the directory. A failure means nothing changed (the old file is intact);
 * `unconfirmed` means the rename happened but its durability is unproven.
 */
export const installStaging = (staging: NativeStaging): Effect.Effect<"installed" | "unconfirmed", StagingFailure> =>
  staging.sync.pipe(
    Effect.andThen(staging.rename),
    Effect.andThen(Effect.as(staging.syncDirectory, "installed" as const).pipe(Effect.orElseSucceed(() => "unconfirmed" as const)))
  )

export interface WorkspaceFsShape {
  /** The workspace root (absent: the daemon has no Environment binding; every operation is unavailable). */
  readonly root: Option.Option<string>
  /** Opens a regular file for reading (the caller owns the handle until its close is confirmed). */
  readonly openFile: (path: string) => Effect.Effect<NativeFile, SafeFsReason>
  /** Opens a directory to list ("" is the root; the caller owns the handle until its close is confirmed). */
  readonly openDirectory: (path: string) => Effect.Effect<NativeDirectory, SafeFsReason>
  /** A tar stream of the whole workspace, pulled from disk (the caller owns it until its close is confirmed). */
  readonly openExport: Effect.Effect<NativeExport, SafeFsReason>
  /**
   * Creates the staging file `tempName` beside the destination `path` (parents created, each verified inside the
   * root; a directory destination is `destination_directory`, a symlink, special file or escaping path
   * `unsafe_destination`). The caller owns it until its `discard` is confirmed.
   */
  readonly openStaging: (path: string, tempName: string) => Effect.Effect<NativeStaging, StagingFailure>
}

export const reasonOf = (e: unknown): SafeFsReason => (e instanceof SafeFsError ? e.reason : "io")

const promise = <A>(f: () => Promise<A>): Effect.Effect<A, SafeFsReason> => Effect.tryPromise({ try: f, catch: reasonOf })

const stagingStep = <A>(f: () => Promise<A>): Effect.Effect<A, StagingFailure> =>
  Effect.tryPromise({ try: f, catch: (e) => (e instanceof DestinationRefused ? e.issue : reasonOf(e)) })

/** An idempotent close of a FileHandle: a later call after success is a no-op; after a failure it retries. */
export const closeOnce = (handle: FsP.FileHandle): NativeClose => {
  let closed = false
  let pending: Promise<void> | undefined
  return promise(async () => {
    if (closed) return
    pending ??= handle.close()
    try {
      await pending
      closed = true
    } finally {
      pending = undefined
    }
  })
}

const unbound: Effect.Effect<never, SafeFsReason> = Effect.fail("not_found")

/** The real implementation over `root` (absent: nothing is bound). */
export const make = (root: string | undefined): WorkspaceFsShape => {
  if (root === undefined) {
    return { root: Option.none(), openFile: () => unbound, openDirectory: () => unbound, openExport: unbound, openStaging: () => unbound }
  }
  return {
    root: Option.some(root),
    openFile: (path) =>
      promise(() => openFileForRead(root, path)).pipe(
        Effect.map(({ handle, size }): NativeFile => ({
          size,
          readPrefix: (max) => promise(() => readPrefix(handle, max)),
          close: closeOnce(handle)
        }))
      ),
    openDirectory: (path) =>
      promise(() => openDirectoryForList(root, path)).pipe(
        Effect.map((handle): NativeDirectory => ({
          list: (max) => promise(() => listDirectory(handle, max)),
          close: closeOnce(handle)
        }))
      ),
    openExport: Effect.sync((): NativeExport => {
      const stream = new ExportStream(root)
      return {
        // A chunk already read from disk is taken synchronously (no promise, no suspended fiber per chunk).
        read: (max) =>
          Effect.suspend(() => {
            const ready = stream.readReady(max)
            return ready !== undefined
              ? Effect.succeed(ready)
              : Effect.tryPromise({ try: () => stream.read(max), catch: (e) => (e instanceof ExportTooLarge ? "too_large" : reasonOf(e)) })
          }),
        close: promise(() => stream.close())
      }
    }),
    openStaging: (path, tempName) =>
      stagingStep(() => createStaging(root, path, tempName)).pipe(
        Effect.map((staging): NativeStaging => ({
          write: (data, offset) => Effect.try({ try: () => writeAllSync(staging.file.fd, data, offset), catch: reasonOf }),
          sync: promise(() => syncStaging(staging)),
          rename: stagingStep(() => renameStaging(staging)),
          syncDirectory: promise(() => syncStagingDirectory(staging)),
          discard: promise(() => discardStaging(staging))
        }))
      )
  }
}

/** The process's workspace implementation (from the Environment binding). */
export class WorkspaceFs extends Context.Service<WorkspaceFs, WorkspaceFsShape>()("agentwire/runtime/WorkspaceFs") {
  static readonly layer = (root: string | undefined, wrap?: (fs: WorkspaceFsShape) => WorkspaceFsShape): Layer.Layer<WorkspaceFs> =>
    Layer.succeed(WorkspaceFs, WorkspaceFs.of((wrap ?? ((fs) => fs))(make(root))))
}
