/**
 * Where the bytes of a `runtime_prepare` transfer are staged and how they are installed (Linux, below the bound
 * workspace root, every directory reached through `safeFs`'s verified descriptor chain):
 *
 * - `file`: not here: the process's `WorkspaceFs.openStaging` (the staging file of `workspace_write`; Steps.ts).
 * - `skill` / `plugin`: a staging directory `.agentwire/staging/<tag>/` holding the body (`body`); at commit the
 *   archive is checked and extracted into `tree/` (zipReader.ts, limits counted while inflating), its manifest
 *   checked against the metadata, and its single root renamed into `.agentwire/skills/<name>` or
 *   `.agentwire/plugins/<slot>` (a previous installation is first moved into the staging directory and restored if
 *   the rename fails).
 *
 * Every install returns `installed`, `refused` (nothing changed) or `unconfirmed` (a rename happened, or a
 * restore failed: the installation's state is not proven). The staging area is removed by `discard` (idempotent).
 */
import * as FsP from "node:fs/promises"
import type { SourceMetadata } from "../../../proto/Execution.js"
import { attempt, fdPath, openDirectoryChain, verifyInside } from "../../workspace/internal/safeFs.js"
import { writeAllSync } from "../../workspace/internal/stagingWrite.js"
import { CapabilityArchiveLimits, manifestOf, pluginMatches, skillMatches } from "./capabilityRules.js"
import { ArchiveRefused, extract, readDirectory } from "./zipReader.js"

export type InstallOutcome = "installed" | "refused" | "unconfirmed"

/** Why a staging area could not be opened (the transfer is refused before `ready`). */
export type OpenIssue = "invalid_path" | "io"

export class OpenRefused extends Error {
  constructor(readonly issue: OpenIssue) {
    super(`runtime_prepare staging: ${issue}`)
  }
}

export interface StagedBody {
  /** Writes `data` at `offset` of the body, synchronously (`safeFs.writeAllSync`; throws `SafeFsError`). */
  readonly write: (data: Uint8Array, offset: number) => void
  /** Installs the complete, verified body. */
  readonly install: () => Promise<InstallOutcome>
  /** Removes the staging area (idempotent; an already removed area is fine). */
  readonly discard: () => Promise<void>
}

const { O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_RDONLY } = FsP.constants

/** The daemon's own directory below the workspace root. */
export const OwnDir = ".agentwire"

const idempotent = (f: () => Promise<void>): (() => Promise<void>) => {
  let done = false
  return async () => {
    if (done) return
    await f()
    done = true
  }
}

/** Opens (creating) `.agentwire/<sub>` below the root, verified inside it. */
const ownDirectory = (root: string, sub: string) => openDirectoryChain(root, [OwnDir, sub], { create: true, followLast: false })

/** `skill` / `plugin`: a staging directory `.agentwire/staging/<tag>/` with the body. */
export const openArchiveBody = async (
  root: string,
  tag: string,
  target: { readonly kind: "skill" | "plugin"; readonly metadata: SourceMetadata; readonly slot: number }
): Promise<StagedBody> => {
  let parent: FsP.FileHandle
  try {
    parent = await ownDirectory(root, "staging")
  } catch {
    throw new OpenRefused("io")
  }
  let stage: FsP.FileHandle | undefined
  let body: FsP.FileHandle | undefined
  const remove = async () => {
    await body?.close().catch(() => undefined)
    await stage?.close().catch(() => undefined)
    await attempt(() => FsP.rm(fdPath(parent.fd, tag), { recursive: true, force: true }))
  }
  try {
    // A leftover of an earlier process with the same tag is removed first.
    await attempt(() => FsP.rm(fdPath(parent.fd, tag), { recursive: true, force: true }))
    await attempt(() => FsP.mkdir(fdPath(parent.fd, tag), { mode: 0o700 }))
    stage = await attempt(() => FsP.open(fdPath(parent.fd, tag), O_RDONLY | O_DIRECTORY | O_NOFOLLOW))
    await verifyInside(root, stage)
    body = await attempt(() => FsP.open(fdPath(stage!.fd, "body"), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600))
  } catch {
    await remove().catch(() => undefined)
    await parent.close().catch(() => undefined)
    throw new OpenRefused("io")
  }
  const stageFd = stage.fd
  const bodyFile = body
  return {
    write: (data, offset) => writeAllSync(bodyFile.fd, data, offset),
    install: () => installArchive(root, stageFd, bodyFile, target),
    discard: idempotent(async () => {
      await remove()
      await attempt(() => parent.close())
    })
  }
}

const readSmall = async (path: string, max: number): Promise<string | undefined> => {
  const handle = await FsP.open(path, O_RDONLY | O_NOFOLLOW)
  try {
    const s = await handle.stat()
    if (!s.isFile() || s.size > max) return undefined
    return (await handle.readFile()).toString("utf8")
  } finally {
    await handle.close().catch(() => undefined)
  }
}

const installArchive = async (
  root: string,
  stageFd: number,
  body: FsP.FileHandle,
  target: { readonly kind: "skill" | "plugin"; readonly metadata: SourceMetadata; readonly slot: number }
): Promise<InstallOutcome> => {
  const size = (await body.stat()).size
  if (size > CapabilityArchiveLimits.maxCompressed) return "refused"
  const zip = new Uint8Array(size)
  let filled = 0
  while (filled < size) {
    const { bytesRead } = await body.read(zip, filled, size - filled, filled)
    if (bytesRead === 0) return "refused"
    filled += bytesRead
  }
  const tree = fdPath(stageFd, "tree")
  try {
    const dir = readDirectory(zip, CapabilityArchiveLimits)
    const manifest = manifestOf(target.kind, dir)
    if (manifest === undefined) return "refused"
    await FsP.mkdir(tree, { mode: 0o700 })
    await extract(zip, dir, tree, CapabilityArchiveLimits)
    const text = await readSmall(`${tree}/${manifest}`, 1024 * 1024)
    if (text === undefined) return "refused"
    const matches = target.kind === "skill" ? skillMatches(text, target.metadata) : pluginMatches(text, target.metadata)
    if (!matches) return "refused"
    return await place(root, stageFd, `${tree}/${dir.root}`, target.kind === "skill" ? "skills" : "plugins", target.kind === "skill" ? target.metadata.name : String(target.slot))
  } catch (e) {
    if (e instanceof ArchiveRefused) return "refused"
    return "refused"
  }
}

/**
 * Renames the extracted root into `.agentwire/<sub>/<name>`. A previous installation is moved aside first (into
 * the staging directory, removed with it) and put back if the rename fails; a failed put-back or a failed
 * directory sync after the rename is `unconfirmed`.
 */
const place = async (root: string, stageFd: number, from: string, sub: string, name: string): Promise<InstallOutcome> => {
  let dir: FsP.FileHandle
  try {
    dir = await ownDirectory(root, sub)
  } catch {
    return "refused"
  }
  try {
    const destination = fdPath(dir.fd, name)
    const previous = fdPath(stageFd, "previous")
    let moved = false
    try {
      await FsP.lstat(destination)
      await FsP.rename(destination, previous)
      moved = true
    } catch (e) {
      if ((e as { code?: string }).code !== "ENOENT") return "refused"
    }
    try {
      await FsP.rename(from, destination)
    } catch {
      if (!moved) return "refused"
      try {
        await FsP.rename(previous, destination)
        return "refused"
      } catch {
        return "unconfirmed"
      }
    }
    try {
      await dir.sync()
      return "installed"
    } catch {
      return "unconfirmed"
    }
  } finally {
    await dir.close().catch(() => undefined)
  }
}

/** Is `.agentwire/skills/<name>` an installed skill directory? */
export const skillInstalled = async (root: string, name: string): Promise<boolean> => {
  try {
    const dir = await openDirectoryChain(root, [OwnDir, "skills", name], { create: false, followLast: false })
    await dir.close()
    return true
  } catch {
    return false
  }
}

/** The names of the plugins installed in slots (`.agentwire/plugins/<slot>/.codex-plugin/plugin.json`). */
export const installedPluginNames = async (root: string): Promise<ReadonlySet<string>> => {
  const names = new Set<string>()
  let dir: FsP.FileHandle
  try {
    dir = await openDirectoryChain(root, [OwnDir, "plugins"], { create: false, followLast: false })
  } catch {
    return names
  }
  try {
    for (const slot of await FsP.readdir(fdPath(dir.fd))) {
      if (!/^\d+$/.test(slot)) continue
      const text = await readSmall(fdPath(dir.fd, `${slot}/.codex-plugin/plugin.json`), 1024 * 1024).catch(() => undefined)
      if (text === undefined) continue
      try {
        const parsed = JSON.parse(text) as { name?: unknown }
        if (typeof parsed.name === "string") names.add(parsed.name)
      } catch {
        // not a manifest
      }
    }
  } finally {
    await dir.close().catch(() => undefined)
  }
  return names
}
