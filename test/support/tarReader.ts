/**
 * A tiny tar reader for the export tests (ustar headers with pax `x` path/linkpath records): parses a whole
 * archive held in memory and checks each header's checksum, the end-of-archive marker and that nothing follows
 * it. Returns the entries in archive order with each file's SHA-256.
 */
import { createHash } from "node:crypto"

export interface TarEntryRead {
  readonly path: string
  readonly type: "file" | "directory" | "symlink"
  readonly size: number
  readonly mode: number
  readonly sha256?: string
  readonly linkTarget?: string
}

const text = (b: Uint8Array) => Buffer.from(b).toString("utf8").replace(/\0.*$/s, "")
const octal = (b: Uint8Array) => parseInt(text(b).trim() || "0", 8)

const parsePax = (data: Uint8Array): Map<string, string> => {
  const records = new Map<string, string>()
  let at = 0
  while (at < data.length) {
    const space = data.indexOf(0x20, at)
    const length = parseInt(Buffer.from(data.subarray(at, space)).toString("ascii"), 10)
    const record = Buffer.from(data.subarray(space + 1, at + length - 1)).toString("utf8")
    const eq = record.indexOf("=")
    records.set(record.slice(0, eq), record.slice(eq + 1))
    at += length
  }
  return records
}

export const readTar = (archive: Uint8Array): ReadonlyArray<TarEntryRead> => {
  const entries: Array<TarEntryRead> = []
  let at = 0
  let pax = new Map<string, string>()
  for (;;) {
    if (at + 512 > archive.length) throw new Error("tar: truncated (no end-of-archive marker)")
    const header = archive.subarray(at, at + 512)
    if (header.every((b) => b === 0)) {
      if (archive.length !== at + 1024 || !archive.subarray(at, at + 1024).every((b) => b === 0)) throw new Error("tar: bad end-of-archive marker")
      return entries
    }
    let sum = 0
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!
    if (sum !== octal(header.subarray(148, 156))) throw new Error(`tar: bad checksum at ${at}`)
    if (text(header.subarray(257, 263)) !== "ustar") throw new Error("tar: not ustar")
    const size = octal(header.subarray(124, 136))
    const flag = String.fromCharCode(header[156]!)
    const data = archive.subarray(at + 512, at + 512 + size)
    if (data.length !== size) throw new Error("tar: truncated data")
    at += 512 + Math.ceil(size / 512) * 512
    if (flag === "x") {
      pax = parsePax(data)
      continue
    }
    const name = pax.get("path") ?? text(header.subarray(0, 100))
    const link = pax.get("linkpath") ?? text(header.subarray(157, 257))
    pax = new Map()
    const mode = octal(header.subarray(100, 108))
    if (flag === "5") entries.push({ path: name.replace(/\/$/, ""), type: "directory", size, mode })
    else if (flag === "2") entries.push({ path: name, type: "symlink", size, mode, linkTarget: link })
    else if (flag === "0") entries.push({ path: name, type: "file", size, mode, sha256: createHash("sha256").update(data).digest("hex") })
    else throw new Error(`tar: unexpected type ${flag}`)
  }
}
