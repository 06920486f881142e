/**
 * The raw `ws` baselines of the workspace suite: one WebSocket pair on 127.0.0.1 in the bench process doing the
 * same work as the daemon path with the same frame pattern and the same request / receipt discipline, and
 * nothing else (no codec validation, no gateway, no Effect runtime, no path-safety checks).
 *
 * - Write: `begin` (a JSON frame) → `ready`; each 64 KiB of the body as one JSON frame with base64 data → the
 *   server decodes it, hashes it (SHA-256), writes it at its offset into a staging file beside the destination
 *   and sends `received`; the next chunk only after the receipt; `commit` → digest compared, staging fsynced,
 *   renamed over the destination, directory fsynced → `completed`.
 * - Export: `begin` → the server walks the tree (sorted, depth first) and answers each request with the next
 *   ≤ 64 KiB of file data read from disk, base64 in a JSON frame at its offset; Core's end decodes each chunk
 *   and asks for the next at the new total; `completed` at the end.
 *
 * Roles as in the protocol: the Runtime end (`serve`: it writes and exports) dials and the Core end accepts, so the
 * frames of the Runtime end are masked (RFC 6455 §5.3: a client masks what it sends) exactly as the daemon's are,
 * and Core's are not: export chunks are masked by the sender and unmasked by the receiver on both paths, write
 * chunks on neither.
 *
 * Chunk frames (write chunks, export chunks) are built as the daemon path builds its own (`support/rawFrames.ts`:
 * base64 written into the frame's bytes, no `JSON.stringify` of the 87 KiB text).
 *
 * `repeat: 3` is the negative control: every chunk is moved and processed three times (sent, decoded, hashed or read,
 * written, acknowledged), i.e. a path known to do three times the work per byte.
 */
import { createHash, type Hash } from "node:crypto"
import * as FsP from "node:fs/promises"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { WebSocket, WebSocketServer } from "ws"
import { chunkFrame, textFrame } from "../support/rawFrames.js"

const Chunk = 64 * 1024

interface Frame {
  readonly step: string
  readonly path?: string
  readonly offset?: number
  readonly data?: string
  readonly size?: number
  readonly sha256?: string
}

export interface RawWorkspace {
  /** Writes `body` to `dir/path` (a fresh path per call is not needed: it replaces atomically). */
  readonly write: (path: string, body: Uint8Array, repeat: number) => Promise<void>
  /** Exports the tree below `root`; resolves with the file bytes received. */
  readonly export: (repeat: number) => Promise<number>
  readonly close: () => Promise<void>
}

/** Every regular file below `root`, depth first, names sorted (the daemon's walk order). */
const walk = async (root: string, relative = ""): Promise<Array<string>> => {
  const names = (await FsP.readdir(Path.join(root, relative), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))
  const out: Array<string> = []
  for (const entry of names) {
    const path = relative === "" ? entry.name : `${relative}/${entry.name}`
    if (entry.isDirectory()) out.push(...(await walk(root, path)))
    else if (entry.isFile()) out.push(path)
  }
  return out
}

/** The server side of one connection: a write in progress or an export in progress. */
const serve = (socket: WebSocket, writeDir: string, exportRoot: string) => {
  let staging: { file: FsP.FileHandle; temp: string; dest: string; hash: Hash; received: number; size: number; sha256: string } | undefined
  let exporting: { files: Array<string>; file: FsP.FileHandle | undefined; position: number; sent: number; repeat: number } | undefined
  const reply = (payload: Record<string, unknown>) => socket.send(JSON.stringify({ type: "result", id: "raw", payload }))
  /** A chunk reply, built as the daemon builds its export chunks (`rawFrames.ts`). */
  const replyChunk = (payload: Record<string, unknown>, bytes: Uint8Array) =>
    socket.send(chunkFrame({ type: "result", id: "raw", payload }, bytes), textFrame)

  /** The next ≤ 64 KiB of file data, or undefined at the end of the tree. */
  const nextExportChunk = async (): Promise<Buffer | undefined> => {
    const e = exporting!
    for (;;) {
      if (e.file === undefined) {
        const path = e.files.shift()
        if (path === undefined) return undefined
        e.file = await FsP.open(Path.join(exportRoot, path), "r")
        e.position = 0
      }
      const buffer = Buffer.allocUnsafe(Chunk)
      const { bytesRead } = await e.file.read(buffer, 0, Chunk, e.position)
      if (bytesRead === 0) {
        await e.file.close()
        e.file = undefined
        continue
      }
      e.position += bytesRead
      return buffer.subarray(0, bytesRead)
    }
  }

  const handle = async (frame: Frame) => {
    switch (frame.step) {
      case "begin": {
        const dest = Path.join(writeDir, frame.path!)
        const temp = `${dest}.raw-staging`
        await FsP.mkdir(Path.dirname(dest), { recursive: true })
        const file = await FsP.open(temp, "wx", 0o600)
        staging = { file, temp, dest, hash: createHash("sha256"), received: 0, size: frame.size!, sha256: frame.sha256! }
        return reply({ outcome: "ready" })
      }
      case "chunk": {
        const s = staging!
        const data = Buffer.from(frame.data!, "base64")
        const again = frame.offset! < s.received // the control's second copy of a chunk
        if (!again && frame.offset !== s.received) throw new Error("raw write: wrong offset")
        ;(again ? createHash("sha256") : s.hash).update(data)
        await s.file.write(data, 0, data.length, frame.offset!)
        if (!again) s.received += data.length
        return reply({ outcome: "received", offset: s.received })
      }
      case "commit": {
        const s = staging!
        staging = undefined
        if (s.received !== s.size || s.hash.digest("hex") !== s.sha256) throw new Error("raw write: digest mismatch")
        await s.file.sync()
        await s.file.close()
        await FsP.rename(s.temp, s.dest)
        const dir = await FsP.open(Path.dirname(s.dest), "r")
        await dir.sync()
        await dir.close()
        return reply({ outcome: "completed", size_bytes: s.size })
      }
      case "export": {
        exporting = { files: await walk(exportRoot), file: undefined, position: 0, sent: 0, repeat: frame.size ?? 1 }
        return handle({ step: "next", offset: 0 })
      }
      case "next": {
        const e = exporting!
        if (frame.offset !== e.sent) throw new Error("raw export: wrong offset")
        const chunk = await nextExportChunk()
        if (chunk === undefined) {
          exporting = undefined
          return reply({ outcome: "completed", offset: e.sent })
        }
        // The control reads the chunk again from disk and sends it once more before the real one.
        for (let i = 1; i < e.repeat; i++) {
          const copy = Buffer.allocUnsafe(chunk.length)
          await e.file!.read(copy, 0, chunk.length, e.position - chunk.length)
          replyChunk({ outcome: "chunk", offset: e.sent, again: true }, copy)
        }
        const offset = e.sent
        e.sent += chunk.length
        return replyChunk({ outcome: "chunk", offset }, chunk)
      }
    }
  }
  // One frame at a time, in order (Core's end sends the next request only after the receipt anyway).
  let queue = Promise.resolve()
  socket.on("message", (data) => {
    const text = String(data)
    queue = queue.then(() => handle(JSON.parse(text).payload as Frame)).catch((e: unknown) => {
      socket.close(1011, e instanceof Error ? e.message.slice(0, 100) : "raw server failed")
    })
  })
}

/**
 * Starts the raw pair: the Core end listens, the Runtime end dials and serves (writes go below `writeDir`,
 * exports read `exportRoot`).
 */
export const startRawWorkspace = async (writeDir: string, exportRoot: string): Promise<RawWorkspace> => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 4 * 1024 * 1024, perMessageDeflate: false })
  await new Promise<void>((resolve) => server.once("listening", () => resolve()))
  const accepted = new Promise<WebSocket>((resolve) => server.once("connection", (socket) => resolve(socket)))
  const runtimeEnd = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, { perMessageDeflate: false })
  await new Promise<void>((resolve, reject) => {
    runtimeEnd.once("open", () => resolve())
    runtimeEnd.once("error", reject)
  })
  serve(runtimeEnd, writeDir, exportRoot)
  const coreEnd = await accepted
  let onReply: (payload: Record<string, unknown>) => void = () => {}
  let onClose: (reason: string) => void = () => {}
  coreEnd.on("message", (data) => onReply((JSON.parse(String(data)) as { payload: Record<string, unknown> }).payload))
  coreEnd.on("close", (_code, reason) => onClose(String(reason)))
  const failed = () => new Promise<never>((_, reject) => (onClose = (reason) => reject(new Error(`raw ws closed: ${reason}`))))
  /** Sends one request and resolves with its receipt. */
  const roundTrip = (payload: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve) => {
      onReply = resolve
      coreEnd.send(JSON.stringify({ type: "request", id: "raw", payload }))
    })

  /** Sends one chunk request (built as Core builds its write chunks, `rawFrames.ts`) and resolves with its receipt. */
  const chunkTrip = (offset: number, part: Uint8Array) =>
    new Promise<Record<string, unknown>>((resolve) => {
      onReply = resolve
      coreEnd.send(chunkFrame({ type: "request", id: "raw", payload: { step: "chunk", offset } }, part), textFrame)
    })

  const write = async (path: string, body: Uint8Array, repeat: number) => {
    const sha256 = createHash("sha256").update(body).digest("hex")
    await roundTrip({ step: "begin", path, size: body.length, sha256 })
    for (let offset = 0; offset < body.length; offset += Chunk) {
      const part = body.subarray(offset, Math.min(body.length, offset + Chunk))
      for (let i = 0; i < repeat; i++) await chunkTrip(offset, part)
    }
    const done = await roundTrip({ step: "commit" })
    if (done["outcome"] !== "completed") throw new Error("raw write not completed")
  }

  const exportAll = (repeat: number) =>
    Promise.race([failed(), new Promise<number>((resolve) => {
      let total = 0
      onReply = (payload) => {
        if (payload["outcome"] === "completed") return resolve(total)
        const data = Buffer.from(payload["data"] as string, "base64")
        if (payload["again"] === true) return // the control's extra copy: decoded, not counted
        total += data.length
        coreEnd.send(JSON.stringify({ type: "request", id: "raw", payload: { step: "next", offset: total } }))
      }
      coreEnd.send(JSON.stringify({ type: "request", id: "raw", payload: { step: "export", size: repeat } }))
    })])

  return {
    write: (path, body, repeat) => Promise.race([failed(), write(path, body, repeat)]),
    export: exportAll,
    close: () =>
      new Promise((resolve) => {
        runtimeEnd.terminate()
        for (const c of server.clients) c.terminate()
        server.close(() => resolve())
      })
  }
}
