/**
 * The workspace export's tar stream, pulled from disk (reference part 2 §7.5; output rules in docs/runtime.md
 * "Workspace export"). `read(max)` returns the next ≤ `max` archive bytes, or `null` after the end-of-archive
 * marker. Nothing is buffered beyond one header and one read block of file data (at most 256 KiB,
 * `ReadBlockBytes`): memory does not grow with the workspace.
 *
 * - The walk is iterative (an explicit stack of directory frames, depth-first, entries sorted by name); each
 *   frame holds one directory level's names, listed through `safeFs` (symlinks never followed) and closed at once.
 * - At most two native handles are open at a time: the walk's current directory (opened and verified inside the
 *   root once, then kept for its entries: its files are opened through its descriptor, its subdirectories too;
 *   returning to a parent opens the parent again from the root) and the file being streamed, all through `safeFs`
 *   (every component verified inside the root, and every file's own descriptor too). `close` closes whatever is
 *   open and makes any later open close itself immediately; it is retryable until confirmed.
 * - Included: directories (`dir/`), regular files (data streamed; a file that shrinks while read fails the
 *   export), and symlinks whose target is relative and stays inside the workspace (stored as links, never
 *   followed). Skipped: special files (FIFO, socket, device), hard-linked files, symlinks that are absolute or
 *   leave the root, names the wire cannot carry, and entries that vanish or change kind during the walk.
 *   A `permission_denied` or I/O error fails the export (an archive never silently drops a readable file).
 * - File data is limited to 500 MiB in total (`ExportTooLarge`).
 */
import type * as FsP from "node:fs/promises"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Option } from "effect"
import { validateRelativePath } from "../../../proto/Transfer.js"
import { attempt, fdPath, openChildDirectory, openDirectoryForList, openFileAt, SafeFsError, type SafeFsReason } from "./safeFs.js"
import { listDirectory, type ListedEntry } from "./safeListing.js"
import { EndOfArchive, entryHeader, padding } from "./tarWriter.js"

/** The file-data allowance of one export (the archive's 528 MiB bound adds headers and padding). */
export const MaxExportFileBytes = 500 * 1024 * 1024

export class ExportTooLarge extends Error {
  constructor() {
    super("workspace export: file data over 500 MiB")
  }
}

/** Refusals that mean "leave this entry out" rather than "fail the export". */
const skipped: ReadonlySet<SafeFsReason> = new Set<SafeFsReason>([
  "invalid_path", "not_found", "not_directory", "is_directory", "symlink", "special_file", "hard_link", "escapes_root"
])

const skip = (e: unknown): undefined => {
  if (e instanceof SafeFsError && skipped.has(e.reason)) return undefined
  throw e
}

interface Frame {
  readonly path: string
  readonly entries: ReadonlyArray<ListedEntry>
  index: number
}

interface OpenFile {
  readonly handle: FsP.FileHandle
  readonly size: number
  /** The next file byte the archive takes. */
  position: number
  /** File bytes read ahead of `position` (a view of the current read block), never past `size`. */
  ahead: Uint8Array
}

/**
 * File data is read from disk in blocks of up to 256 KiB (four 64 KiB chunks), and chunks are cut from the
 * block: one thread-pool read per block instead of per chunk (about 20 µs of CPU per 64 KiB chunk on Node 24).
 * A block ends where a chunk ends, so a chunk of file data alone is a view of its block, never copied.
 */
export const ReadBlockBytes = 256 * 1024

/** A symlink target kept in the archive: relative, and lexically inside the root from the link's directory. */
export const safeLinkTarget = (linkPath: string, target: string): boolean => {
  if (target === "" || target.startsWith("/") || /[\u0000\r\n\\]/.test(target)) return false
  const resolved = Path.posix.normalize(Path.posix.join(Path.posix.dirname(linkPath), target))
  return resolved !== ".." && !resolved.startsWith("../") && !Path.posix.isAbsolute(resolved)
}

export class ExportStream {
  private readonly stack: Array<Frame> = []
  private readonly pending: Array<Uint8Array> = []
  private readonly open = new Set<FsP.FileHandle>()
  /** The walk's current directory: opened and verified once for all its entries, not once per file. */
  private dir: { readonly path: string; readonly handle: FsP.FileHandle } | undefined
  private file: OpenFile | undefined
  private started = false
  private ended = false
  private closed = false
  private fileBytes = 0

  constructor(private readonly root: string) {}

  /** Registers an opened handle; after `close` it is closed at once and the walk stops. */
  private async track<H extends FsP.FileHandle>(handle: H): Promise<H> {
    if (this.closed) {
      await handle.close().catch(() => undefined)
      throw new SafeFsError("io")
    }
    this.open.add(handle)
    return handle
  }

  private async release(handle: FsP.FileHandle): Promise<void> {
    await attempt(() => handle.close())
    this.open.delete(handle)
  }

  /** Makes `handle` (tracked) the walk's current directory, closing the one before. */
  private async enter(path: string, handle: FsP.FileHandle): Promise<FsP.FileHandle> {
    const before = this.dir
    this.dir = { path, handle }
    if (before !== undefined) await this.release(before.handle)
    return handle
  }

  /** Closes the current directory (the walk left it for good). */
  private async leave(): Promise<void> {
    const before = this.dir
    this.dir = undefined
    if (before !== undefined) await this.release(before.handle)
  }

  /**
   * The directory `path` ("" is the root), verified inside the root: the current one, else opened from the root
   * component by component, the last one not followed (`openDirectoryForList`), and made current.
   */
  private async directory(path: string): Promise<FsP.FileHandle> {
    if (this.dir !== undefined && this.dir.path === path) return this.dir.handle
    return this.enter(path, await this.track(await openDirectoryForList(this.root, path)))
  }

  /**
   * Lists the directory `name` of `parent` ("" and "" for the root) and makes it the current directory: opened
   * through the current directory's descriptor when that is its parent (`openChildDirectory`), else from the root.
   */
  private async list(parent: string, name: string): Promise<{ readonly entries: ReadonlyArray<ListedEntry>; readonly mode: number; readonly mtimeMs: number }> {
    const path = parent === "" ? name : `${parent}/${name}`
    const dir = name !== "" && this.dir !== undefined && this.dir.path === parent
      ? await this.enter(path, await this.track(await openChildDirectory(this.root, this.dir.handle, name)))
      : await this.directory(path)
    const stat = await attempt(() => dir.stat())
    // Kinds from the entries' own types: every entry is acted on only through a call that checks its kind again.
    const { entries } = await listDirectory(dir, Number.MAX_SAFE_INTEGER, { kindsFromDirents: true })
    return { entries, mode: stat.mode, mtimeMs: stat.mtimeMs }
  }

  private async readLink(parent: string, name: string): Promise<{ readonly target: string; readonly mtimeMs: number } | undefined> {
    const link = fdPath((await this.directory(parent)).fd, name)
    const stat = await attempt(() => Fs.lstat(link))
    if (!stat.isSymbolicLink()) return undefined
    return { target: await attempt(() => Fs.readlink(link)), mtimeMs: stat.mtimeMs }
  }

  /** Queues the next entry's header (and opens its file), or the end-of-archive marker. */
  private async advance(): Promise<void> {
    if (!this.started) {
      this.started = true
      const root = await this.list("", "")
      this.stack.push({ path: "", entries: root.entries, index: 0 })
    }
    for (;;) {
      const frame = this.stack[this.stack.length - 1]
      if (frame === undefined) {
        await this.leave()
        this.pending.push(EndOfArchive)
        this.ended = true
        return
      }
      const entry = frame.entries[frame.index++]
      if (entry === undefined) {
        this.stack.pop()
        continue
      }
      const path = frame.path === "" ? entry.name : `${frame.path}/${entry.name}`
      // A path the wire cannot carry (over 4096 bytes) is left out, as every other name it cannot carry.
      if (Option.isSome(validateRelativePath(path, { allowRoot: false }))) continue
      if (entry.kind === "directory") {
        const listed = await this.list(frame.path, entry.name).catch(skip)
        if (listed === undefined) continue
        this.pending.push(...entryHeader({ path, type: "directory", size: 0, mode: listed.mode, mtimeSeconds: listed.mtimeMs / 1000 }))
        this.stack.push({ path, entries: listed.entries, index: 0 })
        return
      }
      if (entry.kind === "file") {
        const opened = await this.directory(frame.path).then((dir) => openFileAt(this.root, dir, entry.name)).catch(skip)
        if (opened === undefined) continue
        const handle = await this.track(opened.handle)
        if (this.fileBytes + opened.size > MaxExportFileBytes) throw new ExportTooLarge()
        this.fileBytes += opened.size
        this.pending.push(...entryHeader({ path, type: "file", size: opened.size, mode: opened.mode, mtimeSeconds: opened.mtimeMs / 1000 }))
        if (opened.size === 0) await this.release(handle)
        else this.file = { handle, size: opened.size, position: 0, ahead: new Uint8Array(0) }
        return
      }
      if (entry.kind === "symlink") {
        const link = await this.readLink(frame.path, entry.name).catch(skip)
        if (link === undefined || !safeLinkTarget(path, link.target)) continue
        this.pending.push(...entryHeader({ path, type: "symlink", size: 0, mode: 0o777, mtimeSeconds: link.mtimeMs / 1000, linkTarget: link.target }))
        return
      }
      // `other`: special files are never opened.
    }
  }

  /**
   * The next ≤ `room` bytes of the open file: from the read block, else from a new block read at `position`.
   * The block is sized to end where a chunk ends (`room` now, then whole chunks of `max`), within 256 KiB and
   * the size the entry's header declared.
   */
  private async fileData(file: OpenFile, room: number, max: number): Promise<Uint8Array> {
    if (file.ahead.length === 0) {
      const rest = file.size - file.position
      const length = Math.min(rest, room + Math.max(0, Math.floor((ReadBlockBytes - room) / max)) * max)
      // Not zero-filled (every block would pay for clearing bytes it overwrites); after a short read the tail is
      // cleared, so no byte of old process memory is ever reachable through a returned view's buffer.
      const block = Buffer.allocUnsafeSlow(length)
      const { bytesRead } = await attempt(() => file.handle.read(block, 0, length, file.position))
      if (bytesRead === 0) throw new SafeFsError("io") // the file shrank while it was exported
      if (bytesRead < length) block.fill(0, bytesRead)
      file.ahead = new Uint8Array(block.buffer, block.byteOffset, bytesRead)
    }
    const part = file.ahead.subarray(0, Math.min(room, file.ahead.length))
    file.ahead = file.ahead.subarray(part.length)
    file.position += part.length
    return part
  }

  /**
   * The next `max` archive bytes when the read block already holds them and they neither start nor end a file
   * (no header to add, no read or close to wait for): what `read(max)` would return, without a promise. Most chunks
   * of a large file (three of every four). Otherwise undefined: call `read`.
   */
  readReady(max: number): Uint8Array | undefined {
    const file = this.file
    if (this.closed || file === undefined || this.pending.length > 0 || file.ahead.length < max || file.position + max >= file.size) {
      return undefined
    }
    const part = file.ahead.subarray(0, max)
    file.ahead = file.ahead.subarray(max)
    file.position += max
    return part
  }

  /** The next ≤ `max` archive bytes; `null` once the end-of-archive marker was returned. */
  async read(max: number): Promise<Uint8Array | null> {
    // The chunk's parts in order (header blocks, padding, views of file data), joined once at the end: a chunk
    // of one part (file data alone) is returned as it is.
    const parts: Array<Uint8Array> = []
    let filled = 0
    let fileDataOnly = true
    while (filled < max) {
      if (this.closed) throw new SafeFsError("io")
      const head = this.pending[0]
      if (head !== undefined) {
        const n = Math.min(head.length, max - filled)
        parts.push(head.subarray(0, n))
        fileDataOnly = false
        filled += n
        if (n === head.length) this.pending.shift()
        else this.pending[0] = head.subarray(n)
        continue
      }
      const file = this.file
      if (file !== undefined) {
        const part = await this.fileData(file, max - filled, max)
        if (this.closed) throw new SafeFsError("io")
        parts.push(part)
        filled += part.length
        if (file.position === file.size) {
          this.file = undefined
          await this.release(file.handle)
          this.pending.push(padding(file.size))
        }
        continue
      }
      if (this.ended) break
      await this.advance()
    }
    if (filled === 0) return null
    // File data alone is returned as a view of its read block (which holds only this export's file data);
    // header blocks and the end-of-archive marker are shared constants, so a chunk with them is always a copy.
    if (parts.length === 1 && fileDataOnly) return parts[0]!
    const joined = Buffer.allocUnsafeSlow(filled) // every byte is written below
    const out = new Uint8Array(joined.buffer, joined.byteOffset, filled)
    let at = 0
    for (const part of parts) {
      out.set(part, at)
      at += part.length
    }
    return out
  }

  /** Closes every open handle; later opens close themselves. Retryable: a failed close keeps its handle listed. */
  async close(): Promise<void> {
    this.closed = true
    this.file = undefined
    this.dir = undefined
    for (const handle of [...this.open]) await this.release(handle)
  }
}
