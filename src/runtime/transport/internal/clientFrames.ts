/**
 * A batch of WebSocket text frames as a client writes them (RFC 6455 §5.2): FIN set, opcode 1 (text), the
 * payload length in 7, 16 or 64 bits, the mask bit and a fresh 4-byte masking key per frame, the payload masked
 * with it. All frames of a batch go into one buffer, so the batch is one socket write (issue 18, relay): through
 * `ws.send` each frame cost an options object, a header buffer, a masked copy, a stream write with its own
 * callback and an iovec of the `writev`, about 0.6 µs per small frame more than framing it here.
 *
 * The masking keys come from `crypto.randomFillSync` in pools of 2048 keys, as `ws` takes its own (the RFC asks
 * for keys a peer cannot predict); the payload is masked a 4-byte word at a time. A batch of ASCII texts is converted
 * to UTF-8 by one call for the whole batch; a Run's deltas (`EncodedDelta`) are written as UTF-8 from their parts,
 * with no text per frame; other texts are converted one at a time; bytes are masked from where they are.
 * The frames are those `ws.send(bytes, { binary: false })` writes, masking key aside
 * (`test/runtime/transport/ClientFrames.test.ts` reads them back at every length boundary;
 * `WebSocketDial.test.ts` sends batches through a real `ws` server).
 */
import { randomFillSync } from "node:crypto"
import { EncodedDelta } from "../../../proto/EncodedFrame.js"

const KeyPoolBytes = 8 * 1024
const keyPool = Buffer.alloc(KeyPoolBytes)
let keyAt = KeyPoolBytes

/**
 * A text at least this long is measured and written straight into its place in the batch's buffer, not into the
 * scratch first: a Run's `done` may carry its whole content, often hundreds of KB.
 */
const LongText = 16 * 1024

/**
 * Writes the header of a masked text frame with `n` payload bytes at `o` (FIN + text, the shortest length form, a
 * fresh masking key), then the payload found at `source[from…from+n)` masked right after it; returns the offset
 * after the frame. `source` may be `out` itself with `from` at or after the payload's place: every byte is read
 * before the write that could overwrite it, since each write is at or behind the bytes already read. Masked a
 * little-endian word of the key at a time, as `ws`'s native add-on does; the last 0–3 bytes one by one.
 */
const frameAt = (out: Buffer, outView: DataView, o: number, n: number, source: Uint8Array, sourceView: DataView, from: number): number => {
  out[o++] = 0x81 // FIN, text
  if (n < 126) {
    out[o++] = 0x80 | n
  } else if (n < 65536) {
    out[o++] = 0x80 | 126
    out[o++] = n >>> 8
    out[o++] = n & 0xff
  } else {
    out[o++] = 0x80 | 127
    out.writeUInt32BE(Math.floor(n / 0x1_0000_0000), o)
    out.writeUInt32BE(n >>> 0, o + 4)
    o += 8
  }
  if (keyAt === KeyPoolBytes) {
    randomFillSync(keyPool)
    keyAt = 0
  }
  const k0 = keyPool[keyAt]!
  const k1 = keyPool[keyAt + 1]!
  const k2 = keyPool[keyAt + 2]!
  const k3 = keyPool[keyAt + 3]!
  keyAt += 4
  out[o] = k0
  out[o + 1] = k1
  out[o + 2] = k2
  out[o + 3] = k3
  o += 4
  const key = (k0 | (k1 << 8) | (k2 << 16) | (k3 << 24)) >>> 0
  const whole = n & ~3
  let i = 0
  for (; i < whole; i += 4) outView.setUint32(o + i, sourceView.getUint32(from + i, true) ^ key, true)
  if (i < n) out[o + i] = source[from + i]! ^ k0
  if (i + 1 < n) out[o + i + 1] = source[from + i + 1]! ^ k1
  if (i + 2 < n) out[o + i + 2] = source[from + i + 2]! ^ k2
  return o + n
}

const viewOf = (bytes: Uint8Array): DataView => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** Batches of at most this many UTF-16 units of text try the ASCII path (`asciiFrames`). */
const AsciiBatchUnits = 64 * 1024
let scratch = Buffer.allocUnsafe(8 * 1024)
let scratchView = viewOf(scratch)
/** Batches to frame one text at a time before the ASCII path is tried again, after a batch that was not ASCII. */
let asciiBackoff = 0

/**
 * The frames of a batch of texts that are all ASCII, or `undefined` when one is not (nothing is lost but the
 * attempt). The batch's texts are joined and converted to UTF-8 by one call (issue 18, relay: one conversion per
 * frame, with its call into the runtime, was the largest cost of framing a small frame); exactly when every unit is
 * ASCII, the bytes written equal the units, so each text's bytes are its units, in order.
 */
const asciiFrames = (texts: ReadonlyArray<string>, units: number): Buffer | undefined => {
  // Room for 3 bytes per unit: the whole text is written, so the count is its UTF-8 size (units only when ASCII).
  if (scratch.length < 3 * units) {
    scratch = Buffer.allocUnsafe(Math.max(3 * units, 8 * 1024))
    scratchView = viewOf(scratch)
  }
  if (scratch.write(texts.join(""), 0, "utf8") !== units) return undefined
  let size = 0
  for (let j = 0; j < texts.length; j++) {
    const n = texts[j]!.length
    size += (n < 126 ? 6 : n < 65536 ? 8 : 14) + n
  }
  const out = Buffer.allocUnsafe(size)
  const outView = viewOf(out)
  let o = 0
  let from = 0
  for (let j = 0; j < texts.length; j++) {
    const n = texts[j]!.length
    o = frameAt(out, outView, o, n, scratch, scratchView, from)
    from += n
  }
  return out
}

/** What one frame of a batch is given as: its text, its UTF-8 bytes, or a Run's delta kept as its parts. */
export type FramePayload = string | Uint8Array | EncodedDelta

/** A delta whose room is larger is written from its text (`encoded`), so the scratch never grows for one frame. */
const LongDeltaRoom = 64 * 1024
/** A scratch grown past this for one batch is let go after it. */
const ScratchKeep = 1024 * 1024
/** Each payload's UTF-8 size in the batch being framed (reused: no array per batch). */
const sizes: Array<number> = []
/** How each payload of the batch being framed is placed: 0 from the scratch, 1 a long text, 2 bytes. */
const placed: Array<number> = []
/** Each long text of the batch being framed (a long delta's made once), at its payload's index; cleared after. */
const longTexts: Array<string | undefined> = []

/** The scratch with room for `need` bytes from `at`, the `at` bytes already written kept. */
const scratchFor = (at: number, need: number): void => {
  if (at + need <= scratch.length) return
  const grown = Buffer.allocUnsafe(Math.max(2 * scratch.length, at + need))
  scratch.copy(grown, 0, 0, at)
  scratch = grown
  scratchView = viewOf(grown)
}

const headerBytes = (n: number): number => (n < 126 ? 6 : n < 65536 ? 8 : 14)

/**
 * The frames of a batch with deltas (`EncodedDelta`) or bytes: each delta's UTF-8 bytes are written from its parts,
 * and each short text converted, into the scratch one after another (no frame text, no join: issue 18, relay);
 * then the exact-size buffer is framed from them. A long text is measured, then written into its place there; bytes
 * are masked from where they are.
 */
const partsFrames = (payloads: ReadonlyArray<FramePayload>): { readonly frames: Buffer; readonly bytes: number } => {
  let at = 0
  let size = 0
  let bytes = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    let n: number
    let how = 0
    if (payload instanceof EncodedDelta) {
      const room = payload.room
      if (room <= LongDeltaRoom) {
        scratchFor(at, room)
        n = payload.writeUtf8(scratch, at) - at
        at += n
      } else {
        const text = payload.encoded
        longTexts[j] = text
        n = Buffer.byteLength(text, "utf8")
        how = 1
      }
    } else if (typeof payload === "string") {
      if (payload.length < LongText) {
        scratchFor(at, 3 * payload.length)
        n = scratch.write(payload, at, "utf8")
        at += n
      } else {
        longTexts[j] = payload
        n = Buffer.byteLength(payload, "utf8")
        how = 1
      }
    } else {
      n = payload.byteLength
      how = 2
    }
    sizes[j] = n
    placed[j] = how
    size += headerBytes(n) + n
    bytes += n
  }
  const out = Buffer.allocUnsafe(size)
  const view = viewOf(out)
  let o = 0
  let from = 0
  for (let j = 0; j < payloads.length; j++) {
    const n = sizes[j]!
    const how = placed[j]!
    if (how === 0) {
      o = frameAt(out, view, o, n, scratch, scratchView, from)
      from += n
    } else if (how === 1) {
      const text = longTexts[j]!
      longTexts[j] = undefined
      const place = o + headerBytes(n)
      out.write(text, place, "utf8")
      o = frameAt(out, view, o, n, out, view, place)
    } else {
      const payload = payloads[j] as Uint8Array
      o = frameAt(out, view, o, n, payload, viewOf(payload), 0)
    }
  }
  if (scratch.length > ScratchKeep) {
    scratch = Buffer.allocUnsafe(8 * 1024)
    scratchView = viewOf(scratch)
  }
  return { frames: out, bytes }
}

/**
 * The masked client text frames of `payloads` (one frame's text, its UTF-8 bytes, or a delta's parts, each), in
 * order, in one buffer, and the UTF-8 size of their payloads together (what the transport counts as sent).
 */
export const maskedTextFrames = (payloads: ReadonlyArray<FramePayload>): { readonly frames: Buffer; readonly bytes: number } => {
  let units = 0
  let texts = true
  for (let j = 0; j < payloads.length && texts; j++) {
    const payload = payloads[j]!
    if (typeof payload === "string") units += payload.length
    else texts = false
  }
  if (texts && units <= AsciiBatchUnits) {
    if (asciiBackoff > 0) asciiBackoff--
    else {
      const frames = asciiFrames(payloads as ReadonlyArray<string>, units)
      if (frames !== undefined) return { frames, bytes: units }
      asciiBackoff = 16
    }
  }
  return partsFrames(payloads)
}
