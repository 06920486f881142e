/**
 * The raw baselines' chunk frames (bench/support/rawFrames.ts) are the same bytes as the plain
 * `JSON.stringify` frame they replace: the bar does the same work on the wire, only without the slow encoding.
 */
import { assert, describe, it } from "@effect/vitest"
import { chunkFrame } from "../../bench/support/rawFrames.js"

describe("rawFrames.chunkFrame", () => {
  it("is the UTF-8 of JSON.stringify of the envelope with the base64 data, for every base64 tail", () => {
    const bodies = [
      new Uint8Array([0]),
      new Uint8Array([0xfb, 0xff]),
      Uint8Array.from({ length: 256 }, (_, i) => i),
      Uint8Array.from({ length: 65536 }, (_, i) => (i * 2654435761) >>> 24).subarray(1, 65535)
    ]
    const envelopes = [
      { type: "request", id: "raw", payload: { step: "chunk", offset: 65536 } },
      { type: "result", id: "raw", payload: { outcome: "chunk", offset: 0, again: true } },
      { type: "runtime_prepare", id: "überträgung-😀", payload: { step: "chunk", offset: 3 } }
    ]
    for (const envelope of envelopes) {
      for (const bytes of bodies) {
        const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64")
        const expected = Buffer.from(JSON.stringify({ ...envelope, payload: { ...envelope.payload, data } }), "utf8")
        assert.isTrue(chunkFrame(envelope, bytes).equals(expected), `${envelope.type} / ${bytes.length} bytes`)
      }
    }
  })
})
