/**
 * A batch of WebSocket text frames as a client writes them (RFC 6455 §5.2): FIN set, opcode 1 (text), the
 * payload length in 7, 16 or 64 bits, the mask bit and a fresh 4-byte masking key per frame, the payload masked
 * with it. All frames of a batch go into one buffer, so the batch is one socket write (issue 18, relay): through
 * `ws.send` each frame cost an options object, a header buffer, a masked copy, a stream write with its own
 * callback and an iovec of the `writev`, about 0.6 µs per small frame more than framing it here.
 *
 * The masking keys come from `crypto.randomFillSync` in pools of 2048 keys, as `ws` takes its own (the RFC asks
 * for keys a peer cannot predict); the payload is masked byte by byte, as `ws` does without its native add-on. A
 * frame given as text is encoded to UTF-8 in its place in the buffer and masked there.
 * The frames are those `ws.send(bytes, { binary: false })` writes, masking key aside
 * (`test/runtime/transport/ClientFrames.test.ts` reads them back at every length boundary;
 * `WebSocketDial.test.ts` sends batches through a real `ws` server).
 */
import { randomFillSync } from "node:crypto"

const KeyPoolBytes = 8 * 1024
const keyPool = Buffer.alloc(KeyPoolBytes)
let keyAt = KeyPoolBytes

/** Header bytes of a masked frame with `n` payload bytes: 2, plus 2 or 8 for the extended length, plus the key. */
const headerBytes = (n: number): number => (n < 126 ? 6 : n < 65536 ? 8 : 14)

/** The masked client text frames of `payloads` (one frame's text, or its UTF-8 bytes, each), in order, in one buffer. */
export const maskedTextFrames = (payloads: ReadonlyArray<string | Uint8Array>): Buffer => {
  // A text is written as UTF-8 straight into its place and masked there: no copy of its own (issue 18, relay).
  const lengths: Array<number> = new Array(payloads.length)
  let total = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    const n = typeof payload === "string" ? Buffer.byteLength(payload, "utf8") : payload.byteLength
    lengths[j] = n
    total += headerBytes(n) + n
  }
  const out = Buffer.allocUnsafe(total)
  let o = 0
  for (let j = 0; j < payloads.length; j++) {
    const payload = payloads[j]!
    const n = lengths[j]!
    out[o++] = 0x81 // FIN, text
    if (n < 126) {
      out[o++] = 0x80 | n
    } else if (n < 65536) {
      out[o++] = 0x80 | 126
      out.writeUInt16BE(n, o)
      o += 2
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
    const source: Uint8Array = typeof payload === "string" ? out : payload
    const from = typeof payload === "string" ? o : 0
    if (typeof payload === "string") out.write(payload, o, n, "utf8")
    const whole = n & ~3
    let i = 0
    for (; i < whole; i += 4) {
      out[o + i] = source[from + i]! ^ k0
      out[o + i + 1] = source[from + i + 1]! ^ k1
      out[o + i + 2] = source[from + i + 2]! ^ k2
      out[o + i + 3] = source[from + i + 3]! ^ k3
    }
    if (i < n) out[o + i] = source[from + i]! ^ k0
    if (i + 1 < n) out[o + i + 1] = source[from + i + 1]! ^ k1
    if (i + 2 < n) out[o + i + 2] = source[from + i + 2]! ^ k2
    o += n
  }
  return out
}
