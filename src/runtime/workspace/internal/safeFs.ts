/**
 * Path-safe filesystem access below a workspace root (Linux). Every path is checked against the wire grammar
 * first (`validateRelativePath`: slash-separated, no leading slash, no empty, `.` or `..` element, no
 * backslash, NUL, CR or LF, at most 4096 bytes). Then it is resolved openat-style: each directory is opened and
 * the real path of the opened descriptor (`/proc/self/fd/N`) is checked to lie inside the root before anything
 * below it is touched; the next component is reached through that descriptor (`/proc/self/fd/N/name`), so a
 * directory swapped for a symlink during the operation can only lead to a descriptor that fails the check.
 *
 * - Intermediate symlinks are followed only when the directory they reach is inside the root.
 * - The final component is never followed (`O_NOFOLLOW`): a symlink is refused for reads and writes and listed
 *   as `symlink` in directories.
 * - Special files (FIFO, socket, device) are never opened: `lstat` first; a regular file is opened with
 *   `O_NONBLOCK` (a FIFO swapped in cannot hang the open) and its identity (device, inode) must equal the
 *   `lstat` result, else it is refused.
 * - A regular file with more than one hard link is refused for reads (a link can name a file outside the root).
 *
 * Every function returns a `SafeFsError` with a finite reason; errno texts and paths are never in it.
 */
import * as Fs from "node:fs"
import * as FsP from "node:fs/promises"
import { Option } from "effect"
import { validateRelativePath } from "../../../proto/Transfer.js"

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = Fs.constants

export type SafeFsReason =
  | "invalid_path"
  | "not_found"
  | "permission_denied"
  | "not_directory"
  | "is_directory"
  | "symlink"
  | "special_file"
  | "hard_link"
  | "escapes_root"
  | "exists"
  | "io"

export class SafeFsError extends Error {
  constructor(readonly reason: SafeFsReason) {
    super(`workspace filesystem: ${reason}`)
  }
}

/** The refusal an errno maps to (never the errno text). */
export const errnoReason = (e: unknown): SafeFsReason => {
  switch ((e as { code?: string }).code) {
    case "ENOENT":
      return "not_found"
    case "EACCES":
    case "EPERM":
      return "permission_denied"
    case "ENOTDIR":
      return "not_directory"
    case "EISDIR":
      return "is_directory"
    case "ELOOP":
      return "symlink"
    case "ENXIO":
      return "special_file"
    case "EEXIST":
      return "exists"
    default:
      return "io"
  }
}

/** Runs a syscall; a failure becomes a `SafeFsError` (never the errno text). */
export const attempt = async <A>(f: () => Promise<A>): Promise<A> => {
  try {
    return await f()
  } catch (e) {
    throw e instanceof SafeFsError ? e : new SafeFsError(errnoReason(e))
  }
}

/** The path through an open descriptor (Linux `/proc/self/fd`), optionally to a name inside it. */
export const fdPath = (fd: number, name?: string): string => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`)

const inside = (root: string, real: string): boolean =>
  real === root || real.startsWith(root.endsWith("/") ? root : `${root}/`)

/** Fails unless the open descriptor's real path lies inside the root. */
export const verifyInside = async (root: string, handle: FsP.FileHandle): Promise<void> => {
  const real = await attempt(() => FsP.readlink(fdPath(handle.fd)))
  if (!inside(root, real)) throw new SafeFsError("escapes_root")
}

/** Closes quietly (used only on paths that already fail). */
const closeQuietly = (handle: FsP.FileHandle) => handle.close().catch(() => undefined)

/** Splits a checked relative path into its components ("" → none). */
export const components = (relative: string, options: { readonly allowRoot: boolean }): ReadonlyArray<string> => {
  if (Option.isSome(validateRelativePath(relative, options))) throw new SafeFsError("invalid_path")
  return relative === "" ? [] : relative.split("/")
}

/** Opens the root itself as a directory and checks it is still the root. */
export const openRoot = async (root: string): Promise<FsP.FileHandle> => {
  const handle = await attempt(() => FsP.open(root, O_RDONLY | O_DIRECTORY))
  try {
    const real = await attempt(() => FsP.readlink(fdPath(handle.fd)))
    if (real !== root) throw new SafeFsError("escapes_root")
    return handle
  } catch (e) {
    await closeQuietly(handle)
    throw e
  }
}

/**
 * Opens the directory `dirs` (components) below the root, one component at a time, each verified inside the
 * root. `create`: a missing component is created (mode 0755) through its parent's descriptor. The caller owns
 * (closes) the result.
 */
export const openDirectoryChain = async (
  root: string,
  dirs: ReadonlyArray<string>,
  options: { readonly create: boolean; readonly followLast: boolean }
): Promise<FsP.FileHandle> => {
  let current = await openRoot(root)
  for (let i = 0; i < dirs.length; i++) {
    const name = dirs[i]!
    const last = i === dirs.length - 1
    const flags = O_RDONLY | O_DIRECTORY | (last && !options.followLast ? O_NOFOLLOW : 0)
    try {
      let next: FsP.FileHandle
      try {
        next = await attempt(() => FsP.open(fdPath(current.fd, name), flags))
      } catch (e) {
        if (!(e instanceof SafeFsError) || e.reason !== "not_found" || !options.create) throw e
        await attempt(() => FsP.mkdir(fdPath(current.fd, name), { mode: 0o755 })).catch((m: SafeFsError) => {
          if (m.reason !== "exists") throw m
        })
        next = await attempt(() => FsP.open(fdPath(current.fd, name), flags | O_NOFOLLOW))
      }
      try {
        await verifyInside(root, next)
      } catch (e) {
        await closeQuietly(next)
        throw e
      }
      await current.close()
      current = next
    } catch (e) {
      await closeQuietly(current)
      throw e
    }
  }
  return current
}

export interface OpenedFile {
  readonly handle: FsP.FileHandle
  readonly size: number
  readonly mode: number
  readonly mtimeMs: number
}

/**
 * Opens a regular file for reading: parent chain verified, final component `lstat`ed (a symlink, a directory,
 * a special file or a hard-linked file is refused before any open), opened `O_NOFOLLOW | O_NONBLOCK`, and its
 * identity re-checked on the descriptor. The caller owns (closes) the handle.
 */
export const openFileForRead = async (root: string, relative: string): Promise<OpenedFile> => {
  const parts = components(relative, { allowRoot: false })
  const name = parts[parts.length - 1]!
  const dir = await openDirectoryChain(root, parts.slice(0, -1), { create: false, followLast: true })
  try {
    return await openFileAt(root, dir, name)
  } finally {
    await dir.close().catch(() => undefined)
  }
}

/** One directory entry's name: a single path component (no `/`), checked against the wire grammar. */
const component = (name: string): string => {
  if (name.includes("/") || Option.isSome(validateRelativePath(name, { allowRoot: false }))) throw new SafeFsError("invalid_path")
  return name
}

/**
 * `openFileForRead`'s checks for the entry `name` of an open directory that was verified inside the root (the
 * export walk opens each directory once for all its files): `lstat` first (a symlink, directory, special or
 * hard-linked file is refused before any open), opened `O_NOFOLLOW | O_NONBLOCK`, its identity re-checked on the
 * descriptor, and the descriptor's own real path verified inside the root (so a directory moved out of the root
 * after it was opened only leads to a refusal). The caller owns (closes) the handle; `dir` stays open.
 */
export const openFileAt = async (root: string, dir: FsP.FileHandle, name: string): Promise<OpenedFile> => {
  const path = fdPath(dir.fd, component(name))
  const before = await attempt(() => FsP.lstat(path))
  checkRegular(before)
  const handle = await attempt(() => FsP.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK))
  try {
    const after = await attempt(() => handle.stat())
    if (after.dev !== before.dev || after.ino !== before.ino) throw new SafeFsError("special_file")
    checkRegular(after)
    await verifyInside(root, handle)
    return { handle, size: after.size, mode: after.mode, mtimeMs: after.mtimeMs }
  } catch (e) {
    await closeQuietly(handle)
    throw e
  }
}

/**
 * Opens the subdirectory `name` of an open directory that was verified inside the root, as
 * `openDirectoryForList` opens a path's last component: `O_DIRECTORY | O_NOFOLLOW` (a symlink, a file or a missing
 * entry is `not_directory`), then verified inside the root. The caller owns (closes) the result; `parent` stays open.
 */
export const openChildDirectory = async (root: string, parent: FsP.FileHandle, name: string): Promise<FsP.FileHandle> => {
  const path = fdPath(parent.fd, component(name))
  let handle: FsP.FileHandle
  try {
    handle = await attempt(() => FsP.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW))
  } catch (e) {
    if (e instanceof SafeFsError && (e.reason === "not_found" || e.reason === "symlink" || e.reason === "not_directory")) {
      throw new SafeFsError("not_directory")
    }
    throw e
  }
  try {
    await verifyInside(root, handle)
  } catch (e) {
    await closeQuietly(handle)
    throw e
  }
  return handle
}

const checkRegular = (s: Fs.Stats) => {
  if (s.isSymbolicLink()) throw new SafeFsError("symlink")
  if (s.isDirectory()) throw new SafeFsError("is_directory")
  if (!s.isFile()) throw new SafeFsError("special_file")
  if (s.nlink > 1) throw new SafeFsError("hard_link")
}

/**
 * Opens a directory to list: "" is the root; otherwise the final component is opened `O_DIRECTORY |
 * O_NOFOLLOW` (a symlink, a file or a missing path is `not_directory`). The caller owns (closes) the handle.
 */
export const openDirectoryForList = async (root: string, relative: string): Promise<FsP.FileHandle> => {
  const parts = components(relative, { allowRoot: true })
  try {
    return await openDirectoryChain(root, parts, { create: false, followLast: false })
  } catch (e) {
    if (e instanceof SafeFsError && (e.reason === "not_found" || e.reason === "symlink" || e.reason === "not_directory")) {
      // Only the final component decides `not_directory`; a missing parent is not_found like any missing path.
      throw new SafeFsError(parts.length > 0 ? "not_directory" : e.reason)
    }
    throw e
  }
}

/** Reads up to `max` bytes from the start of an open file (a short read loop until EOF or `max`). */
export const readPrefix = async (handle: FsP.FileHandle, max: number): Promise<{ readonly bytes: Uint8Array; readonly more: boolean }> => {
  const buffer = Buffer.alloc(max + 1)
  let filled = 0
  while (filled < buffer.length) {
    const { bytesRead } = await attempt(() => handle.read(buffer, filled, buffer.length - filled, filled))
    if (bytesRead === 0) break
    filled += bytesRead
  }
  const more = filled > max
  return { bytes: new Uint8Array(buffer.buffer, buffer.byteOffset, Math.min(filled, max)), more }
}

export { O_CREAT, O_EXCL, O_NOFOLLOW, O_WRONLY }

/** Why a destination cannot take a write (`write_rejected` reasons). */
export type DestinationIssue = "destination_directory" | "unsafe_destination"

export class DestinationRefused extends Error {
  constructor(readonly issue: DestinationIssue) {
    super(`workspace write: ${issue}`)
  }
}

/** The destination's current state, checked without following it. */
const checkDestination = async (dir: FsP.FileHandle, name: string): Promise<number | undefined> => {
  try {
    const s = await FsP.lstat(fdPath(dir.fd, name))
    if (s.isDirectory()) throw new DestinationRefused("destination_directory")
    if (!s.isFile()) throw new DestinationRefused("unsafe_destination")
    return s.mode & 0o777
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return undefined
    throw e instanceof DestinationRefused ? e : new SafeFsError(errnoReason(e))
  }
}

export interface Staging {
  /** The destination's directory (verified inside the root). */
  readonly dir: FsP.FileHandle
  readonly name: string
  readonly tempName: string
  readonly file: FsP.FileHandle
}

/**
 * Creates the staging file for a write beside its destination: parents created as needed (each verified
 * inside the root), the destination checked (a directory is `destination_directory`; a symlink, special file or
 * a parent path leaving the root or naming a file is refused), then `tempName` created `O_EXCL | O_NOFOLLOW`.
 */
export const createStaging = async (root: string, relative: string, tempName: string): Promise<Staging> => {
  const parts = components(relative, { allowRoot: false })
  let dir: FsP.FileHandle
  try {
    dir = await openDirectoryChain(root, parts.slice(0, -1), { create: true, followLast: true })
  } catch (e) {
    if (e instanceof SafeFsError && e.reason === "not_directory") throw new DestinationRefused("destination_directory")
    if (e instanceof SafeFsError && (e.reason === "escapes_root" || e.reason === "symlink")) throw new DestinationRefused("unsafe_destination")
    throw e
  }
  try {
    const name = parts[parts.length - 1]!
    await checkDestination(dir, name)
    const file = await attempt(() => FsP.open(fdPath(dir.fd, tempName), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600))
    return { dir, name, tempName, file }
  } catch (e) {
    await closeQuietly(dir)
    throw e
  }
}

/** First install step: fsync and close the complete staging file. */
export const syncStaging = async (staging: Staging): Promise<void> => {
  await attempt(() => staging.file.sync())
  await attempt(() => staging.file.close())
}

/**
 * Second install step: re-check the destination, copy an existing file's mode (else 0644) and rename the staging
 * file over it (atomic: the old file stays intact on any failure before the rename).
 */
export const renameStaging = async (staging: Staging): Promise<void> => {
  const mode = await checkDestination(staging.dir, staging.name)
  await attempt(() => FsP.chmod(fdPath(staging.dir.fd, staging.tempName), mode ?? 0o644))
  await attempt(() => FsP.rename(fdPath(staging.dir.fd, staging.tempName), fdPath(staging.dir.fd, staging.name)))
}

/** Last install step: fsync the destination's directory (the durability of the rename). */
export const syncStagingDirectory = (staging: Staging): Promise<void> => attempt(() => staging.dir.sync())

/**
 * Installs a complete staging file: `syncStaging`, `renameStaging`, `syncStagingDirectory`. `renamed` tells the
 * caller whether the rename happened (an error after it is ambiguous).
 */
export const installStaging = async (staging: Staging, progress: { renamed: boolean }): Promise<void> => {
  await syncStaging(staging)
  await renameStaging(staging)
  progress.renamed = true
  await syncStagingDirectory(staging)
}

/** Removes a staging file (already gone is fine) and closes its handles. */
export const discardStaging = async (staging: Staging): Promise<void> => {
  await staging.file.close().catch(() => undefined)
  try {
    await FsP.unlink(fdPath(staging.dir.fd, staging.tempName))
  } catch (e) {
    if ((e as { code?: string }).code !== "ENOENT") throw new SafeFsError(errnoReason(e))
  }
  await attempt(() => staging.dir.close())
}
