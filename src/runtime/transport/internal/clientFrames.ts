/**
 * A batch of WebSocket text frames as a client writes them (RFC 6455 §5.2): FIN set, opcode 1 (text), the
 * payload length in 7, 16 or 64 bits, the mask bit and a fresh 4-byte masking key per frame, the payload masked
 * with it. All frames of a batch go into one buffer, so the batch is one socket write (issue 18, relay): through
 * `ws.send` each frame cost an options object, a header buffer, a masked copy, a stream write with its own
 * callback and an iovec of the `writev`, about 0.6 µs per small frame more than framing it here.
 *
 * The masking keys come from `crypto.randomFillSync` in pools of 2048 keys, as `ws` takes its own (the RFC asks
 * for keys a peer cannot predict); the payload is masked a 4-byte word at a time. A batch of ASCII texts (the relay's
 * deltas) is converted to UTF-8 by one call for the whole batch; otherwise each text is encoded to UTF-8 in the
 * batch's buffer and masked there.
 * The frames are those `ws.send(bytes, { binary: false })` writes, masking key aside
 * (`test/runtime/transport/ClientFrames.test.ts` reads them back at every length boundary;
 * `WebSocketDial.test.ts` sends batches through a real `ws` server).
 */
import { randomFillSync } from "node:crypto"

const KeyPoolBytes = 8 * 1024
const keyPool = Buffer.alloc(KeyPoolBytes)
let keyAt = KeyPoolBytes

/**
 * A text at least this long is measured before it is written (its room is its UTF-8 size, not 3 bytes per unit):
 * a Run's `done` carries its whole content, often hundreds of KB, written here as text rather than converted first.
 */
const LongText = 16 * 1024

/** Header room before a text written into the batch: its UTF-8 size is at most 3 bytes per UTF-16 unit. */
const roomFor = (text: string): number => (3 * text.length < 65536 ? 8 : 14)

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

/**
 * The masked client text frames of `payloads` (one frame's text, or its UTF-8 bytes, each), in order, in one buffer,
 * and the UTF-8 size of their payloads together (what the transport counts as sent).
 */
export const maskedTextFrames = (payloads: ReadonlyArray<string | Uint8Array>): { readonly frames: Buffer; readonly bytes: number } => {
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
  // One payload at a time. A short text is never measured before it is written (issue 18, relay: `Buffer.byteLength`
  // per frame, twice, was a twentieth of the daemon's relay samples): the buffer is sized for the worst case (3 bytes
  // per UTF-16 unit), the text is encoded to UTF-8 right after the room for the longest header its size allows, and
  // `frameAt` moves it next to its header (back by the header bytes not used) while masking it: no copy of its own.
  // A long text (`LongText`) is measured first, so its room is its size. Bytes are masked into their place.
  let bound = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    bound += typeof payload !== "string"
      ? 14 + payload.byteLength
      : payload.length < LongText
      ? roomFor(payload) + 3 * payload.length
      : roomFor(payload) + Buffer.byteLength(payload, "utf8")
  }
  const out = Buffer.allocUnsafe(bound)
  const view = viewOf(out)
  let o = 0
  let bytes = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    let n: number
    if (typeof payload === "string") {
      const from = o + roomFor(payload)
      n = out.write(payload, from, "utf8")
      o = frameAt(out, view, o, n, out, view, from)
    } else {
      // Masked from where the bytes are, with no copy of their own first (a `done` of a long Run is hundreds of KB).
      n = payload.byteLength
      o = frameAt(out, view, o, n, payload, viewOf(payload), 0)
    }
    bytes += n
  }
  return { frames: out.subarray(0, o), bytes }
}
