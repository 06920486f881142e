/**
 * A batch of WebSocket text frames as a client writes them (RFC 6455 §5.2): FIN set, opcode 1 (text), the
 * payload length in 7, 16 or 64 bits, the mask bit and a fresh 4-byte masking key per frame, the payload masked
 * with it. All frames of a batch go into one buffer, so the batch is one socket write (issue 18, relay): through
 * `ws.send` each frame cost an options object, a header buffer, a masked copy, a stream write with its own
 * callback and an iovec of the `writev`, about 0.6 µs per small frame more than framing it here.
 *
 * The masking keys come from `crypto.randomFillSync` in pools of 2048 keys, as `ws` takes its own (the RFC asks
 * for keys a peer cannot predict); the payload is masked a 4-byte word at a time. A frame given as text is encoded to
 * UTF-8 in the batch's buffer and masked there.
 * The frames are those `ws.send(bytes, { binary: false })` writes, masking key aside
 * (`test/runtime/transport/ClientFrames.test.ts` reads them back at every length boundary;
 * `WebSocketDial.test.ts` sends batches through a real `ws` server).
 */
import { randomFillSync } from "node:crypto"

const KeyPoolBytes = 8 * 1024
const keyPool = Buffer.alloc(KeyPoolBytes)
let keyAt = KeyPoolBytes

/** Header room before a text written into the batch: its UTF-8 size is at most 3 bytes per UTF-16 unit. */
const roomFor = (text: string): number => (3 * text.length < 65536 ? 8 : 14)

/**
 * The masked client text frames of `payloads` (one frame's text, or its UTF-8 bytes, each), in order, in one buffer,
 * and the UTF-8 size of their payloads together (what the transport counts as sent).
 */
export const maskedTextFrames = (payloads: ReadonlyArray<string | Uint8Array>): { readonly frames: Buffer; readonly bytes: number } => {
  // A text is never measured before it is written (issue 18, relay: `Buffer.byteLength` per frame, twice, was a
  // twentieth of the daemon's relay samples): the buffer is sized for the worst case (3 bytes per UTF-16 unit; a text
  // of the transport's is under 2 KiB), the text is encoded to UTF-8 right after the room for the longest header its
  // size allows, and the masking loop moves it next to its header (back by the header bytes not used) while masking
  // it: no copy of its own. Bytes are copied into their place and masked there.
  let bound = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    bound += typeof payload === "string" ? roomFor(payload) + 3 * payload.length : 14 + payload.byteLength
  }
  const out = Buffer.allocUnsafe(bound)
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength)
  let o = 0
  let bytes = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    let from = 0
    let n: number
    if (typeof payload === "string") {
      from = o + roomFor(payload)
      n = out.write(payload, from, "utf8")
    } else {
      n = payload.byteLength
    }
    bytes += n
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
    if (typeof payload !== "string") {
      out.set(payload, o)
      from = o
    }
    // The payload sits at `from` >= `o` in `out`: every byte is read before the write that could overwrite it,
    // since each write is at or behind the bytes already read. Masked 4 bytes at a time (a little-endian word of
    // the key), as `ws`'s native add-on does; the last 0–3 bytes one by one.
    const key = (k0 | (k1 << 8) | (k2 << 16) | (k3 << 24)) >>> 0
    const whole = n & ~3
    let i = 0
    for (; i < whole; i += 4) view.setUint32(o + i, view.getUint32(from + i, true) ^ key, true)
    if (i < n) out[o + i] = out[from + i]! ^ k0
    if (i + 1 < n) out[o + i + 1] = out[from + i + 1]! ^ k1
    if (i + 2 < n) out[o + i + 2] = out[from + i + 2]! ^ k2
    o += n
  }
  return { frames: out.subarray(0, o), bytes }
}
