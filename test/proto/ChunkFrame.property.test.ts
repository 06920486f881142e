/**
 * The dedicated chunk-frame decoder (`ChunkFrame.ts`) against the generic decode it short-cuts (`decodeEnvelope`,
 * step two, strict base64 of `data`): on frames Core's encoder writes it must answer, with the generic decoder's
 * message and bytes; on any other frame (mutations of valid ones: reordered or duplicated members, whitespace,
 * escapes, URL-safe or non-canonical base64, odd offsets, ids and traces, other types and steps, random byte
 * edits) it either answers exactly as the generic decoder does or declines (`undefined`), never differently.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { decodeChunkFrame } from "../../src/proto/ChunkFrame.js"
import { encodeChunkFrame } from "../../src/proto/EncodedFrame.js"
import { decodeEnvelope } from "../../src/proto/Envelope.js"
import { decodeCoreToRuntimeEnvelope, type Message } from "../../src/proto/Messages.js"
import { decodeChunkData } from "../../src/proto/Transfer.js"

const seeded = (seed: number) => () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
const utf8 = new TextEncoder()
const text = new TextDecoder()

const bytesOf = (random: () => number, length: number) => {
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256)
  return bytes
}
const uuid = (random: () => number) =>
  [8, 4, 4, 4, 12].map((n) => Array.from({ length: n }, () => "0123456789abcdef"[Math.floor(random() * 16)]).join("")).join("-")
const Trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/** A chunk frame as Core writes it (`encodeChunkFrame`), as bytes. */
const coreFrame = (random: () => number, type: "runtime_prepare" | "workspace_write", length: number): Uint8Array => {
  const offset = Math.floor(random() * 4) * 65536
  const payload = type === "runtime_prepare" && offset === 0 ? { step: "chunk" as const } : { step: "chunk" as const, offset }
  const trace = random() < 0.5 ? { trace: Trace } : {}
  const message = { type, id: uuid(random), payload, ...trace } as Message & { payload: { data?: string } }
  const frame = encodeChunkFrame(message, bytesOf(random, length))
  assert.isTrue(Result.isSuccess(frame))
  return Result.getOrThrow(frame).bytes!
}

/** The generic answer: the message with `data` as the fast path leaves it, and the decoded data, or the failure. */
const generic = (frame: Uint8Array) => {
  const raw = decodeEnvelope(frame)
  if (Result.isFailure(raw)) return { ok: false as const, why: raw.failure.code }
  const decoded = decodeCoreToRuntimeEnvelope(raw.success)
  if (Result.isFailure(decoded)) return { ok: false as const, why: decoded.failure.code }
  const message = decoded.success as { type: string; payload: { step?: string; data?: string } }
  if (message.payload.step !== "chunk" || message.payload.data === undefined) return { ok: false as const, why: "not a chunk" }
  const data = decodeChunkData(message.payload.data)
  if (Result.isFailure(data)) return { ok: false as const, why: "bad_base64" }
  return { ok: true as const, message: { ...message, payload: { ...message.payload, data: "" } }, data: data.success, bytes: raw.success.bytes }
}

/** The fast path either declines or agrees with the generic decoder; returns whether it answered. */
const agrees = (frame: Uint8Array): boolean => {
  const fast = decodeChunkFrame(frame)
  if (fast === undefined) return false
  const slow = generic(frame)
  assert.isTrue(slow.ok, `fast path accepted a frame the generic decoder refuses: ${text.decode(frame.subarray(0, 200))}`)
  if (!slow.ok) return true
  assert.deepStrictEqual<unknown>(fast.message, slow.message)
  assert.deepStrictEqual(fast.data, slow.data)
  assert.strictEqual(fast.bytes, slow.bytes)
  return true
}

const edit = (frame: Uint8Array, from: string, to: string): Uint8Array => utf8.encode(text.decode(frame).replace(from, to))

describe("decodeChunkFrame", () => {
  it("answers every frame Core's encoder writes, as the generic decoder does", () => {
    const random = seeded(7)
    for (let i = 0; i < 300; i++) {
      const type = random() < 0.5 ? "runtime_prepare" : "workspace_write"
      const length = i % 10 === 0 ? 65536 : Math.floor(random() * 3000)
      assert.isTrue(agrees(coreFrame(random, type, length)), `declined a valid ${type} frame of ${length} bytes`)
    }
  })

  it("declines what it does not recognize, and never disagrees with the generic decoder", () => {
    const random = seeded(11)
    const base = coreFrame(random, "runtime_prepare", 31)
    const write = coreFrame(random, "workspace_write", 30)
    const data = /"data":"([^"]*)"/.exec(text.decode(base))![1]!
    const declined: Array<[string, Uint8Array]> = [
      ["whitespace", edit(base, `"payload":{`, `"payload": {`)],
      ["members reordered", utf8.encode(text.decode(base).replace(`{"step":"chunk",`, `{`).replace(`"}`, `","step":"chunk"}`))],
      ["escaped data", edit(base, `"data":"${data}"`, `"data":"${data.slice(0, 2)}\\u0041${data.slice(3)}"`)],
      ["url-safe base64", edit(base, data, data.replace(/[+/]/g, "-").replace(/^./, "-"))],
      ["non-canonical padding", edit(base, `"data":"${data}"`, `"data":"${data.slice(0, -2)}B="`)],
      ["base64 without padding", edit(base, `"data":"${data}"`, `"data":"${data.replace(/=+$/, "")}"`)],
      ["leading zero offset", edit(write, `"offset":`, `"offset":0`)],
      ["negative offset", edit(write, `"offset":`, `"offset":-`)],
      ["fractional offset", edit(write, `,"data"`, `.5,"data"`)],
      ["empty id", utf8.encode(text.decode(base).replace(/"id":"[^"]*"/, `"id":""`))],
      ["blank id", utf8.encode(text.decode(base).replace(/"id":"[^"]*"/, `"id":"   "`))],
      ["id over 128 bytes", utf8.encode(text.decode(base).replace(/"id":"[^"]*"/, `"id":"${"a".repeat(129)}"`))],
      ["escaped id", utf8.encode(text.decode(base).replace(/"id":"[^"]*"/, `"id":"a\\"b"`))],
      ["non-ASCII id", utf8.encode(text.decode(base).replace(/"id":"[^"]*"/, `"id":"é"`))],
      ["extra member", edit(base, `"data":`, `"x":1,"data":`)],
      ["duplicate data", edit(base, `"data":`, `"data":"AAAA","data":`)],
      ["trailing member", utf8.encode(text.decode(base).slice(0, -1) + `,"z":1}`)],
      ["trailing whitespace", utf8.encode(text.decode(base) + " ")],
      ["empty trace", utf8.encode(text.decode(base).slice(0, -1) + `,"trace":""}`)],
      ["long trace", utf8.encode(text.decode(base).slice(0, -1) + `,"trace":"${"t".repeat(257)}"}`)],
      ["other step", edit(base, `"step":"chunk"`, `"step":"commit"`)],
      ["other type", edit(base, `"runtime_prepare"`, `"workspace_read"`)],
      ["truncated", base.subarray(0, base.length - 1)]
    ]
    for (const [name, frame] of declined) {
      assert.isUndefined(decodeChunkFrame(frame), name)
      agrees(frame)
    }
    // Random byte edits of valid frames: whatever the fast path answers, the generic decoder answers the same.
    const Bytes = [0x22, 0x5c, 0x7d, 0x2c, 0x20, 0x30, 0x39, 0x2d, 0x5f, 0x3d, 0x41, 0x2b, 0x2f, 0xc3, 0x80, 0x00, 0x7f]
    let answered = 0
    for (let i = 0; i < 3000; i++) {
      const frame = coreFrame(random, random() < 0.5 ? "runtime_prepare" : "workspace_write", Math.floor(random() * 40))
      const at = Math.floor(random() * frame.length)
      const b = Bytes[Math.floor(random() * Bytes.length)]!
      const kind = Math.floor(random() * 3)
      const mutated = kind === 0
        ? Uint8Array.from(frame, (x, j) => (j === at ? b : x))
        : kind === 1
        ? Uint8Array.from([...frame.subarray(0, at), b, ...frame.subarray(at)])
        : Uint8Array.from([...frame.subarray(0, at), ...frame.subarray(at + 1)])
      if (agrees(mutated)) answered++
    }
    // Some edits keep a valid frame (a digit of the id or offset, an alphabet byte of the data).
    assert.isAbove(answered, 0)
  })

  it("takes a JSON value's text as its value only where no escape can occur", () => {
    const random = seeded(3)
    const frame = coreFrame(random, "workspace_write", 3)
    const fast = decodeChunkFrame(frame)!
    assert.strictEqual(fast.message.type, "workspace_write")
    assert.strictEqual(fast.message.payload.data, "")
    assert.strictEqual(fast.data.length, 3)
  })
})
