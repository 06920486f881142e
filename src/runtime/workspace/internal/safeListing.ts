/**
 * Directory listings below a workspace root (Linux), for directory reads and the export walk: one level of a
 * directory opened through `safeFs` (so already verified inside the root), streamed, never followed. Names the wire
 * cannot carry are left out; kinds come from `lstat`, or from the entries' own types where the caller re-checks
 * every entry it acts on (`kindsFromDirents`).
 */
import type * as Fs from "node:fs"
import * as FsP from "node:fs/promises"
import { attempt, fdPath, type SafeFsError } from "./safeFs.js"

export type EntryKind = "file" | "directory" | "symlink" | "other"

export interface ListedEntry {
  readonly name: string
  readonly kind: EntryKind
  readonly size: number | null
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** A name the wire can carry: valid UTF-8, 1..255 bytes, no `/`, `\`, NUL, CR or LF, not `.` / `..`. */
const wireName = (raw: string): string | undefined => {
  const bytes = Buffer.from(raw, "latin1")
  if (bytes.length === 0 || bytes.length > 255) return undefined
  let name: string
  try {
    name = utf8.decode(bytes)
  } catch {
    return undefined
  }
  if (name === "." || name === ".." || /[/\\\u0000\r\n]/.test(name)) return undefined
  return name
}

/**
 * Lists one level of an open directory: at most `max` entries, symlinks listed (never followed), file sizes
 * from `lstat`. Names the wire cannot carry are left out and make the listing `truncated`, as does any entry
 * beyond `max`. Memory is bounded by `max`: the directory is streamed, never read whole. Sorted by name.
 *
 * `kindsFromDirents`: each entry's kind comes from the directory entry's own type where the filesystem reports
 * one (`d_type`), and `lstat` runs only where it does not; `size` is then null for those entries. For a caller
 * that acts on an entry only through a call that checks its kind again (the export walk: `openFileAt`,
 * `openChildDirectory`, an `lstat` before reading a link), so a kind changed since the listing is refused there.
 */
export const listDirectory = async (
  dir: FsP.FileHandle,
  max: number,
  options?: { readonly kindsFromDirents?: boolean }
): Promise<{ readonly entries: ReadonlyArray<ListedEntry>; readonly truncated: boolean }> => {
  const entries: Array<ListedEntry> = []
  let truncated = false
  const handle = await attempt(() => FsP.opendir(fdPath(dir.fd), { encoding: "latin1", bufferSize: 64 }))
  try {
    for (;;) {
      const dirent = await attempt(() => handle.read())
      if (dirent === null) break
      const name = wireName(dirent.name)
      if (name === undefined) {
        truncated = true
        continue
      }
      if (entries.length >= max) {
        truncated = true
        break
      }
      const typed = options?.kindsFromDirents === true ? direntKind(dirent) : undefined
      if (typed !== undefined) {
        entries.push({ name, kind: typed, size: null })
        continue
      }
      // The raw name bytes (latin1 round-trips them): a UTF-8 string path would re-encode a non-ASCII name.
      const raw = Buffer.concat([Buffer.from(`${fdPath(dir.fd)}/`), Buffer.from(dirent.name, "latin1")])
      const stat = await attempt(() => FsP.lstat(raw)).catch((e: SafeFsError) => {
        if (e.reason === "not_found") return undefined // removed while listing
        throw e
      })
      if (stat === undefined) continue
      const kind: EntryKind = stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other"
      entries.push({ name, kind, size: kind === "file" ? stat.size : null })
    }
  } finally {
    await handle.close().catch(() => undefined)
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return { entries, truncated }
}

/** The kind a directory entry's own type reports, or undefined when the filesystem reported none. */
const direntKind = (dirent: Fs.Dirent): EntryKind | undefined =>
  dirent.isFile() ? "file"
  : dirent.isDirectory() ? "directory"
  : dirent.isSymbolicLink() ? "symlink"
  : dirent.isFIFO() || dirent.isSocket() || dirent.isCharacterDevice() || dirent.isBlockDevice() ? "other"
  : undefined
