/**
 * A minimal POSIX tar (ustar, with pax extended headers) encoder for the workspace export: pure functions that
 * return header blocks; file data is streamed by the caller and padded with `padding`. Written from the POSIX
 * `pax` format description (IEEE Std 1003.1, "pax Interchange Format").
 *
 * - Every header is 512 bytes; numeric fields are zero-padded octal terminated by NUL; the checksum is the sum of
 *   the header's bytes with the checksum field read as eight spaces.
 * - Owner and group are always 0 with empty names (nothing about the daemon's users leaks); mode keeps only the
 *   permission bits; mtime is whole seconds.
 * - A path or link target that does not fit ustar's 100-byte field (or is not ASCII) is carried in a pax `x`
 *   header (`path=` / `linkpath=` records) before the entry; the ustar field then holds a truncated ASCII stand-in.
 * - The archive ends with two zero blocks (`EndOfArchive`).
 */

export const BlockBytes = 512

export type TarEntryType = "file" | "directory" | "symlink"

export interface TarEntry {
  /** Workspace-relative path (a directory's path without a trailing slash). */
  readonly path: string
  readonly type: TarEntryType
  /** Data bytes that follow the header (0 for directories and symlinks). */
  readonly size: number
  readonly mode: number
  readonly mtimeSeconds: number
  readonly linkTarget?: string
}

const encoder = new TextEncoder()

const writeString = (block: Uint8Array, offset: number, length: number, value: Uint8Array) => {
  block.set(value.subarray(0, length), offset)
}

/** Zero-padded octal of `length - 1` digits followed by NUL. */
const writeOctal = (block: Uint8Array, offset: number, length: number, value: number) => {
  const digits = Math.max(0, Math.floor(value)).toString(8).padStart(length - 1, "0")
  if (digits.length > length - 1) throw new RangeError("tar numeric field overflow")
  writeString(block, offset, length - 1, encoder.encode(digits))
  block[offset + length - 1] = 0
}

const isAscii = (s: string) => /^[\x20-\x7e]*$/.test(s)

const typeFlag: Record<TarEntryType | "pax", number> = { file: 0x30, directory: 0x35, symlink: 0x32, pax: 0x78 }

const ustarHeader = (
  name: Uint8Array,
  type: TarEntryType | "pax",
  size: number,
  mode: number,
  mtimeSeconds: number,
  link: Uint8Array
): Uint8Array => {
  const block = new Uint8Array(BlockBytes)
  writeString(block, 0, 100, name)
  writeOctal(block, 100, 8, mode & 0o7777)
  writeOctal(block, 108, 8, 0)
  writeOctal(block, 116, 8, 0)
  writeOctal(block, 124, 12, size)
  writeOctal(block, 136, 12, mtimeSeconds)
  block.fill(0x20, 148, 156)
  block[156] = typeFlag[type]
  writeString(block, 157, 100, link)
  writeString(block, 257, 6, encoder.encode("ustar\0"))
  writeString(block, 263, 2, encoder.encode("00"))
  let sum = 0
  for (const b of block) sum += b
  writeOctal(block, 148, 7, sum)
  block[155] = 0x20
  return block
}

/** One pax record: `"<len> <key>=<value>\n"` where `<len>` counts the whole record including itself. */
export const paxRecord = (key: string, value: string): Uint8Array => {
  const body = encoder.encode(` ${key}=${value}\n`)
  let length = body.length + 1
  while (String(length).length + body.length !== length) length = String(length).length + body.length
  const record = new Uint8Array(length)
  record.set(encoder.encode(String(length)), 0)
  record.set(body, String(length).length)
  return record
}

/** Zero bytes that pad `size` data bytes to a whole block. */
export const padding = (size: number): Uint8Array => new Uint8Array((BlockBytes - (size % BlockBytes)) % BlockBytes)

/** The end-of-archive marker: two zero blocks. */
export const EndOfArchive = new Uint8Array(2 * BlockBytes)

/** The header block(s) of one entry: a pax `x` header (with its data, padded) when needed, then the ustar header. */
export const entryHeader = (entry: TarEntry): ReadonlyArray<Uint8Array> => {
  const path = entry.type === "directory" ? `${entry.path}/` : entry.path
  const link = entry.linkTarget ?? ""
  const records: Array<Uint8Array> = []
  const pathBytes = encoder.encode(path)
  const linkBytes = encoder.encode(link)
  if (pathBytes.length > 100 || !isAscii(path)) records.push(paxRecord("path", path))
  if (linkBytes.length > 100 || !isAscii(link)) records.push(paxRecord("linkpath", link))
  const blocks: Array<Uint8Array> = []
  if (records.length > 0) {
    const size = records.reduce((n, r) => n + r.length, 0)
    const data = new Uint8Array(size)
    let at = 0
    for (const r of records) {
      data.set(r, at)
      at += r.length
    }
    blocks.push(ustarHeader(encoder.encode("PaxHeader"), "pax", size, 0o644, entry.mtimeSeconds, new Uint8Array(0)), data, padding(size))
  }
  const stand = (bytes: Uint8Array, s: string) => (bytes.length <= 100 && isAscii(s) ? bytes : encoder.encode(s.replace(/[^\x20-\x7e]/g, "_").slice(-100)))
  blocks.push(ustarHeader(stand(pathBytes, path), entry.type, entry.size, entry.mode, entry.mtimeSeconds, stand(linkBytes, link)))
  return blocks
}
