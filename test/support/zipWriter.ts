/**
 * A tiny zip writer for the runtime_prepare archive tests: stored or deflated entries with an optional Unix mode
 * (symlinks and special entries for the refusal cases), raw name bytes, and overrides of the declared sizes (to
 * build archives that lie about their expansion).
 */
import * as Zlib from "node:zlib"

export interface ZipSpec {
  readonly name: string | Uint8Array
  readonly data?: Uint8Array | string
  /** Unix mode (type and permission bits), stored in the external attributes with host 3. */
  readonly mode?: number
  readonly method?: 0 | 8
  /** Declared uncompressed size (default: the real size). */
  readonly declaredSize?: number
}

const u16 = (n: number) => Buffer.from([n & 0xff, (n >>> 8) & 0xff])
const u32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n >>> 0)
  return b
}

export const buildZip = (entries: ReadonlyArray<ZipSpec>): Buffer => {
  const locals: Array<Buffer> = []
  const centrals: Array<Buffer> = []
  let offset = 0
  for (const e of entries) {
    const name = typeof e.name === "string" ? Buffer.from(e.name) : Buffer.from(e.name)
    const raw = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data)
    const method = e.method ?? (raw.length > 0 ? 8 : 0)
    const body = method === 8 ? Zlib.deflateRawSync(raw) : raw
    const crc = Zlib.crc32(raw)
    const size = e.declaredSize ?? raw.length
    const directory = name.at(-1) === 0x2f
    const mode = e.mode ?? (directory ? 0o040755 : 0o100644)
    const local = Buffer.concat([
      u32(0x04034b50), u16(20), u16(0x0800), u16(method), u16(0), u16(0), u32(crc), u32(body.length), u32(size),
      u16(name.length), u16(0), name
    ])
    centrals.push(Buffer.concat([
      u32(0x02014b50), u16((3 << 8) | 20), u16(20), u16(0x0800), u16(method), u16(0), u16(0), u32(crc), u32(body.length),
      u32(size), u16(name.length), u16(0), u16(0), u16(0), u16(0), u32((mode << 16) >>> 0), u32(offset), name
    ]))
    locals.push(local, body)
    offset += local.length + body.length
  }
  const cd = Buffer.concat(centrals)
  const eocd = Buffer.concat([
    u32(0x06054b50), u16(0), u16(0), u16(entries.length), u16(entries.length), u32(cd.length), u32(offset), u16(0)
  ])
  return Buffer.concat([...locals, cd, eocd])
}

/** A valid skill archive: `<root>/SKILL.md` with the front matter, plus extra files. */
export const skillZip = (
  name: string,
  description: string,
  options: { readonly root?: string; readonly extra?: ReadonlyArray<ZipSpec>; readonly frontName?: string } = {}
): Buffer => {
  const root = options.root ?? name
  return buildZip([
    { name: `${root}/` },
    { name: `${root}/SKILL.md`, data: `---\nname: ${options.frontName ?? name}\ndescription: ${description}\n---\n\n# ${name}\n\nUse it.\n` },
    ...(options.extra ?? [])
  ])
}
