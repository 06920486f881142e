/**
 * A small bounded zip reader for `runtime_prepare` archives (skills, plugins). It reads the central directory of
 * an archive already staged in memory (the staged body is at most the compressed limit), checks every entry
 * before anything is written, and extracts through `node:zlib` with the limits counted WHILE inflating:
 *
 * - the archive is at most `maxCompressed` bytes; at most `maxEntries` entries (the end record's count is
 *   checked before the directory is walked); no zip64, multi-disk, encrypted or non-stored/deflated entry;
 * - every name is valid UTF-8, relative, clean (no empty, `.` or `..` segment), with no backslash, NUL, CR or
 *   LF, no drive letter, at most 4096 bytes, and unique;
 * - a Unix mode that is a symlink, FIFO, socket or device is refused (only regular files and directories);
 * - every entry lies below one single root directory (`single root`);
 * - the declared sizes must sum to at most `maxExpanded`, and the inflater's output is counted chunk by chunk:
 *   an entry that expands past its declared size or past what is left of `maxExpanded` is refused at that
 *   chunk, before more output is produced (a zip bomb never expands beyond the limit); the CRC-32 and the exact
 *   size are verified at the entry's end.
 *
 * Failures are `ArchiveRefused` with a finite issue; names and bytes from the archive are never in it.
 */
import * as FsP from "node:fs/promises"
import * as Zlib from "node:zlib"

export type ArchiveIssue =
  | "not_zip"
  | "compressed_too_large"
  | "too_many_entries"
  | "expanded_too_large"
  | "unsupported" // zip64, multi-disk, encryption, a compression method other than stored / deflate
  | "unsafe_name"
  | "duplicate_entry"
  | "symlink"
  | "special_entry"
  | "not_single_root"
  | "corrupt" // bad offsets, a size or CRC mismatch, inflate error

export class ArchiveRefused extends Error {
  constructor(readonly issue: ArchiveIssue) {
    super(`archive refused: ${issue}`)
  }
}

export interface ArchiveLimits {
  readonly maxCompressed: number
  readonly maxExpanded: number
  readonly maxEntries: number
}

export interface ZipEntry {
  /** The clean relative name without a trailing slash. */
  readonly name: string
  readonly directory: boolean
  readonly method: 0 | 8
  readonly crc32: number
  readonly compressedSize: number
  readonly size: number
  readonly localOffset: number
  readonly executable: boolean
}

export interface ZipDirectory {
  readonly entries: ReadonlyArray<ZipEntry>
  /** The single root directory every entry lies below. */
  readonly root: string
  /** Where the entries' data ends (the central directory's offset). */
  readonly dataEnd: number
}

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50
const S_IFMT = 0o170000
const S_IFREG = 0o100000
const S_IFDIR = 0o040000
const S_IFLNK = 0o120000

const refuse = (issue: ArchiveIssue): never => {
  throw new ArchiveRefused(issue)
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The clean name of an entry (without a trailing slash), or a refusal. */
export const checkEntryName = (raw: Uint8Array): { readonly name: string; readonly directory: boolean } => {
  if (raw.length === 0 || raw.length > 4096) return refuse("unsafe_name")
  let name: string
  try {
    name = utf8.decode(raw)
  } catch {
    return refuse("unsafe_name")
  }
  if (/[\\\u0000\r\n]/.test(name) || name.startsWith("/") || /^[A-Za-z]:/.test(name)) return refuse("unsafe_name")
  const directory = name.endsWith("/")
  const clean = directory ? name.slice(0, -1) : name
  if (clean === "") return refuse("unsafe_name")
  for (const segment of clean.split("/")) {
    if (segment === "" || segment === "." || segment === "..") return refuse("unsafe_name")
  }
  return { name: clean, directory }
}

/** Reads and checks the central directory (no data is inflated here). */
export const readDirectory = (zip: Uint8Array, limits: ArchiveLimits): ZipDirectory => {
  if (zip.length > limits.maxCompressed) return refuse("compressed_too_large")
  if (zip.length < 22) return refuse("not_zip")
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength)
  let eocd = -1
  for (let at = zip.length - 22; at >= Math.max(0, zip.length - 22 - 0xffff); at--) {
    if (view.getUint32(at, true) === EOCD && at + 22 + view.getUint16(at + 20, true) === zip.length) {
      eocd = at
      break
    }
  }
  if (eocd < 0) return refuse("not_zip")
  const disk = view.getUint16(eocd + 4, true)
  const cdDisk = view.getUint16(eocd + 6, true)
  const onDisk = view.getUint16(eocd + 8, true)
  const count = view.getUint16(eocd + 10, true)
  const cdSize = view.getUint32(eocd + 12, true)
  const cdOffset = view.getUint32(eocd + 16, true)
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) return refuse("unsupported")
  if (disk !== 0 || cdDisk !== 0 || onDisk !== count) return refuse("unsupported")
  if (count > limits.maxEntries) return refuse("too_many_entries")
  if (cdOffset + cdSize > eocd) return refuse("corrupt")
  const entries: Array<ZipEntry> = []
  const seen = new Set<string>()
  let declared = 0
  let root: string | undefined
  let at = cdOffset
  for (let i = 0; i < count; i++) {
    if (at + 46 > cdOffset + cdSize || view.getUint32(at, true) !== CENTRAL) return refuse("corrupt")
    const host = view.getUint8(at + 5)
    const flags = view.getUint16(at + 8, true)
    const method = view.getUint16(at + 10, true)
    const crc32 = view.getUint32(at + 16, true)
    const compressedSize = view.getUint32(at + 20, true)
    const size = view.getUint32(at + 24, true)
    const nameLength = view.getUint16(at + 28, true)
    const extraLength = view.getUint16(at + 30, true)
    const commentLength = view.getUint16(at + 32, true)
    const external = view.getUint32(at + 38, true)
    const localOffset = view.getUint32(at + 42, true)
    const end = at + 46 + nameLength + extraLength + commentLength
    if (end > cdOffset + cdSize) return refuse("corrupt")
    if ((flags & 0x1) !== 0 || (flags & 0x40) !== 0) return refuse("unsupported")
    if (method !== 0 && method !== 8) return refuse("unsupported")
    if (compressedSize === 0xffffffff || size === 0xffffffff || localOffset === 0xffffffff) return refuse("unsupported")
    const { name, directory: slash } = checkEntryName(zip.subarray(at + 46, at + 46 + nameLength))
    const mode = host === 3 ? external >>> 16 : 0
    const type = mode & S_IFMT
    if (type === S_IFLNK) return refuse("symlink")
    if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) return refuse("special_entry")
    const directory = slash || type === S_IFDIR || (host === 0 && (external & 0x10) !== 0)
    if (directory && (size !== 0 || !slash)) return refuse("corrupt")
    if (seen.has(name)) return refuse("duplicate_entry")
    seen.add(name)
    const first = name.split("/")[0]!
    if (root === undefined) root = first
    if (first !== root || (!directory && name === first)) return refuse("not_single_root")
    declared += size
    if (declared > limits.maxExpanded) return refuse("expanded_too_large")
    if (localOffset + 30 > cdOffset) return refuse("corrupt")
    entries.push({
      name,
      directory,
      method: method as 0 | 8,
      crc32,
      compressedSize,
      size,
      localOffset,
      executable: (mode & 0o111) !== 0
    })
    at = end
  }
  if (root === undefined) return refuse("not_single_root")
  return { entries, root, dataEnd: cdOffset }
}

/** The compressed bytes of an entry (its local header checked). */
const entryData = (zip: Uint8Array, dir: ZipDirectory, entry: ZipEntry): Uint8Array => {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength)
  if (view.getUint32(entry.localOffset, true) !== LOCAL) return refuse("corrupt")
  const start = entry.localOffset + 30 + view.getUint16(entry.localOffset + 26, true) + view.getUint16(entry.localOffset + 28, true)
  if (start + entry.compressedSize > dir.dataEnd) return refuse("corrupt")
  return zip.subarray(start, start + entry.compressedSize)
}

/**
 * Inflates one entry, handing each output chunk to `sink` as it is produced. More output than `limit` stops the
 * inflater at that chunk (`expanded_too_large`, or `corrupt` when the entry exceeds its own declared size).
 */
const inflateEntry = async (
  data: Uint8Array,
  entry: ZipEntry,
  limit: number,
  sink: (chunk: Uint8Array) => Promise<void>
): Promise<number> => {
  const bound = Math.min(entry.size, limit)
  const over = (n: number) => refuse(n > entry.size ? "corrupt" : "expanded_too_large")
  let crc = 0
  let total = 0
  if (entry.method === 0) {
    if (data.length > bound) over(data.length)
    crc = Zlib.crc32(data)
    total = data.length
    await sink(data)
  } else {
    const inflater = Zlib.createInflateRaw()
    inflater.end(data)
    try {
      for await (const chunk of inflater as AsyncIterable<Buffer>) {
        total += chunk.length
        if (total > bound) over(total)
        crc = Zlib.crc32(chunk, crc)
        await sink(chunk)
      }
    } catch (e) {
      if (e instanceof ArchiveRefused) throw e
      return refuse("corrupt")
    } finally {
      inflater.destroy()
    }
  }
  if (total !== entry.size || crc !== entry.crc32) return refuse("corrupt")
  return total
}

/**
 * Extracts every entry below `target` (an existing, empty directory the caller created and owns; its path may be
 * a `/proc/self/fd/N` path). Directories are created 0755, files `O_EXCL | O_NOFOLLOW` with 0644 (0755 when the
 * archive marks them executable). The expanded total is bounded by `limits.maxExpanded` while inflating.
 */
export const extract = async (zip: Uint8Array, dir: ZipDirectory, target: string, limits: ArchiveLimits): Promise<number> => {
  let expanded = 0
  const made = new Set<string>()
  const ensureDir = async (relative: string) => {
    const parts = relative.split("/")
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join("/")
      if (made.has(sub)) continue
      try {
        await FsP.mkdir(`${target}/${sub}`, { mode: 0o755 })
      } catch (e) {
        if ((e as { code?: string }).code !== "EEXIST") return refuse("corrupt")
        const s = await FsP.lstat(`${target}/${sub}`)
        if (!s.isDirectory()) return refuse("corrupt")
      }
      made.add(sub)
    }
  }
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = FsP.constants
  for (const entry of dir.entries) {
    if (entry.directory) {
      await ensureDir(entry.name)
      continue
    }
    const slash = entry.name.lastIndexOf("/")
    await ensureDir(entry.name.slice(0, slash))
    const data = entryData(zip, dir, entry)
    let file: FsP.FileHandle
    try {
      file = await FsP.open(`${target}/${entry.name}`, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, entry.executable ? 0o755 : 0o644)
    } catch {
      return refuse("corrupt")
    }
    try {
      expanded += await inflateEntry(data, entry, limits.maxExpanded - expanded, async (chunk) => {
        let written = 0
        while (written < chunk.length) written += (await file.write(chunk, written)).bytesWritten
      })
    } finally {
      await file.close().catch(() => undefined)
    }
  }
  return expanded
}
