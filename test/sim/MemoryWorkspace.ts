/**
 * The daemon's workspace in the simulation: an in-memory, deterministic `WorkspaceFsShape` that replaces the real
 * one through `RuntimeProcess.layer({ wrapWorkspaceFs })`, so workspace writes (`workspace_write`) and
 * `runtime_prepare` file transfers stage and install here (both go through `openStaging`). Nothing touches the
 * disk and nothing waits on the event loop, so a schedule stays a function of its seed.
 *
 * It is also the **workspace ledger**'s ground truth: every staging file opened (by its temp name, which the
 * Runtime derives from the operation or transfer id), every install applied (the rename), and the files as they
 * are. Faults, by destination path (the plan gives each write its own path): the install fails before the rename
 * (`install_fails`), the rename hangs until the simulator releases the hangs at quiescence (`install_hangs`), or
 * the directory sync after the rename fails (`install_unconfirmed`: installed, but not proven).
 */
import { createHash } from "node:crypto"
import { Deferred, Effect, Exit, Option } from "effect"
import type { NativeStaging, WorkspaceFsShape } from "../../src/runtime/workspace/WorkspaceFs.js"

export type InstallFault = "install_fails" | "install_hangs" | "install_unconfirmed"

/** The logical root the daemon is bound to (never created on disk: the workspace is in memory). */
export const WorkspaceRoot = "/sim/workspace"

interface StagingFile {
  readonly path: string
  data: Uint8Array
  discarded: boolean
  renamed: boolean
}

export interface WorkspaceLedger {
  /** Installed files by relative path. */
  readonly files: Map<string, Uint8Array>
  /** Install faults by relative destination path. */
  readonly faults: Map<string, InstallFault>
  /** Staging files by temp name (kept after discard, marked). */
  readonly staging: Map<string, StagingFile>
  /** Installs applied (renames) per temp name: at most one each. */
  readonly installs: Map<string, number>
  /** Released at quiescence: a hanging install proceeds then. */
  readonly hangs: Deferred.Deferred<void>
  readonly counts: { staged: number; installed: number; reads: number }
}

export const makeWorkspaceLedger = (): WorkspaceLedger => ({
  files: new Map(),
  faults: new Map(),
  staging: new Map(),
  installs: new Map(),
  hangs: Deferred.makeUnsafe<void>(),
  counts: { staged: 0, installed: 0, reads: 0 }
})

const tag = (id: string) => createHash("sha256").update(id).digest("hex").slice(0, 16)

/** The staging temp name the Runtime uses for a `workspace_write` operation (Writes.ts). */
export const writeTempName = (operationId: string) => `.agentwire-write-${tag(operationId)}.tmp`
/** The staging temp name the Runtime uses for a `runtime_prepare` file transfer (Transfer.ts). */
export const transferTempName = (transferId: string) => `.agentwire-prepare-${tag(transferId)}.tmp`

/** Staging files neither installed nor discarded (a write or transfer still holding its staging area). */
export const openStaging = (ledger: WorkspaceLedger): ReadonlyArray<string> =>
  [...ledger.staging.entries()].filter(([, s]) => !s.discarded && !s.renamed).map(([name]) => name)

export const releaseHangs = (ledger: WorkspaceLedger) => Deferred.doneUnsafe(ledger.hangs, Exit.void)

/** The in-memory workspace (replaces the real implementation; `wrapWorkspaceFs: () => memoryFs(ledger)`). */
export const memoryFs = (ledger: WorkspaceLedger): WorkspaceFsShape => {
  const isDirectory = (path: string) => {
    for (const name of ledger.files.keys()) if (name.startsWith(`${path}/`)) return true
    return false
  }
  const staging = (path: string, tempName: string): NativeStaging => {
    const file: StagingFile = { path, data: new Uint8Array(0), discarded: false, renamed: false }
    ledger.staging.set(tempName, file)
    ledger.counts.staged++
    const fault = ledger.faults.get(path)
    const apply = Effect.sync(() => {
      file.renamed = true
      ledger.files.set(path, file.data)
      ledger.installs.set(tempName, (ledger.installs.get(tempName) ?? 0) + 1)
      ledger.counts.installed++
    })
    return {
      write: (data, offset) =>
        Effect.sync(() => {
          const next = new Uint8Array(Math.max(file.data.length, offset + data.length))
          next.set(file.data)
          next.set(data, offset)
          file.data = next
        }),
      sync: Effect.void,
      rename: fault === "install_fails"
        ? Effect.fail("io" as const)
        : fault === "install_hangs"
        ? Effect.andThen(Deferred.await(ledger.hangs), apply)
        : apply,
      syncDirectory: fault === "install_unconfirmed" ? Effect.fail("io" as const) : Effect.void,
      discard: Effect.sync(() => {
        file.discarded = true
      })
    }
  }
  return {
    root: Option.some(WorkspaceRoot),
    openFile: (path) =>
      Effect.suspend(() => {
        const data = ledger.files.get(path)
        if (data === undefined) return Effect.fail(isDirectory(path) ? "is_directory" as const : "not_found" as const)
        ledger.counts.reads++
        return Effect.succeed({
          size: data.length,
          readPrefix: (max: number) => Effect.succeed({ bytes: data.slice(0, max), more: data.length > max }),
          close: Effect.void
        })
      }),
    openDirectory: (path) =>
      Effect.suspend(() => {
        if (ledger.files.has(path)) return Effect.fail("not_directory" as const)
        const prefix = path === "" ? "" : `${path}/`
        const names = new Map<string, number | null>()
        for (const [name, data] of ledger.files) {
          if (!name.startsWith(prefix)) continue
          const rest = name.slice(prefix.length)
          const slash = rest.indexOf("/")
          names.set(slash < 0 ? rest : rest.slice(0, slash), slash < 0 ? data.length : null)
        }
        const entries = [...names.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        return Effect.succeed({
          list: (max: number) =>
            Effect.succeed({
              entries: entries.slice(0, max).map(([name, size]) => ({ name, kind: size === null ? "directory" as const : "file" as const, size })),
              truncated: entries.length > max
            }),
          close: Effect.void
        })
      }),
    openExport: Effect.fail("not_found"),
    openStaging: (path, tempName) =>
      Effect.suspend(() => (isDirectory(path) ? Effect.fail("destination_directory" as const) : Effect.succeed(staging(path, tempName))))
  }
}
