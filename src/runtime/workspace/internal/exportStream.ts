/**
 * The workspace export's tar stream, pulled from disk (reference part 2 §7.5; output rules in docs/runtime.md
 * "Workspace export"). `read(max)` returns the next ≤ `max` archive bytes, or `null` after the end-of-archive
 * marker. Nothing is buffered beyond one header and one read block of file data (at most 256 KiB,
 * `ReadBlockBytes`): memory does not grow with the workspace.
 *
 * - The walk is iterative (an explicit stack of directory frames, depth-first, entries sorted by name); each
 *   frame holds one directory level's names, listed through `safeFs` (symlinks never followed) and closed at once.
 * - At most one native handle is open at a time (a directory while it is listed, or the file being streamed),
 *   opened through `safeFs` (every component verified inside the root). `close` closes whatever is open and
 *   makes any later open close itself immediately; it is retryable until confirmed.
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
import { attempt, components, fdPath, listDirectory, type ListedEntry, openDirectoryChain, openDirectoryForList, openFileForRead, SafeFsError, type SafeFsReason } from "./safeFs.js"
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

  /** Lists one directory level (opened, listed, closed). */
  private async list(path: string): Promise<{ readonly entries: ReadonlyArray<ListedEntry>; readonly mode: number; readonly mtimeMs: number }> {
    const dir = await this.track(await openDirectoryForList(this.root, path))
    try {
      const stat = await attempt(() => dir.stat())
      const { entries } = await listDirectory(dir, Number.MAX_SAFE_INTEGER)
      return { entries, mode: stat.mode, mtimeMs: stat.mtimeMs }
    } finally {
      await this.release(dir)
    }
  }

  private async readLink(path: string): Promise<{ readonly target: string; readonly mtimeMs: number } | undefined> {
    const parts = components(path, { allowRoot: false })
    const dir = await this.track(await openDirectoryChain(this.root, parts.slice(0, -1), { create: false, followLast: true }))
    try {
      const name = fdPath(dir.fd, parts[parts.length - 1]!)
      const stat = await attempt(() => Fs.lstat(name))
      if (!stat.isSymbolicLink()) return undefined
      return { target: await attempt(() => Fs.readlink(name)), mtimeMs: stat.mtimeMs }
    } finally {
      await this.release(dir)
    }
  }

  /** Queues the next entry's header (and opens its file), or the end-of-archive marker. */
  private async advance(): Promise<void> {
    if (!this.started) {
      this.started = true
      const root = await this.list("")
      this.stack.push({ path: "", entries: root.entries, index: 0 })
    }
    for (;;) {
      const frame = this.stack[this.stack.length - 1]
      if (frame === undefined) {
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
      if (entry.kind === "directory") {
        const listed = await this.list(path).catch(skip)
        if (listed === undefined) continue
        this.pending.push(...entryHeader({ path, type: "directory", size: 0, mode: listed.mode, mtimeSeconds: listed.mtimeMs / 1000 }))
        this.stack.push({ path, entries: listed.entries, index: 0 })
        return
      }
      if (entry.kind === "file") {
        const opened = await openFileForRead(this.root, path).catch(skip)
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
        const link = await this.readLink(path).catch(skip)
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
    for (const handle of [...this.open]) await this.release(handle)
  }
}
