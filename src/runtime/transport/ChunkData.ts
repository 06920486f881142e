/**
 * A received chunk's data, decoded at the transport boundary. A `workspace_write` or `runtime_prepare` chunk
 * carries up to 64 KiB as an 87 KiB base64 string (from the frame's `JSON.parse`). Kept on the decoded message,
 * that string outlived the chunk's handling: every one survived the young generation's scavenges and was
 * promoted to the old generation (about 82 KB promoted per chunk, a third of the daemon's CPU per chunk), although
 * nothing reachable held it after a full GC. So the transport decodes it to bytes (strict base64, the same
 * `decodeChunkData` the handlers used) as soon as the frame is decoded, and the message goes on with `data: ""`
 * and the decoded result under a symbol key (never serialized, never logged). The handlers take the result with
 * `chunkBytes`, and fall back to decoding `data` for a payload that did not come through `decodeInbound`.
 * Every check is unchanged: a chunk step still has `data` (validators see `""`), and bad base64 or an empty chunk
 * is still refused by the handler from the result.
 */
import { Result } from "effect"
import { decodeChunkData } from "../../proto/Transfer.js"

const Decoded: unique symbol = Symbol.for("agentwire/runtime/ChunkData")

type ChunkResult = Result.Result<Uint8Array, "bad_base64">

interface ChunkPayload {
  readonly step: string
  readonly data?: string
}

interface Detached {
  /** The decoded data until a handler takes it (`chunkBytes`); then `null`. */
  [Decoded]?: ChunkResult | null
}

/** `payload` with a chunk's `data` decoded and its text dropped; any other payload unchanged. */
export const detach = <P extends ChunkPayload>(payload: P): P => {
  if (payload.step !== "chunk" || payload.data === undefined) return payload
  const detached: P & Detached = { ...payload, data: "", [Decoded]: decodeChunkData(payload.data) }
  return detached
}

/**
 * `payload` (a chunk whose `data` text was never made: `ChunkFrame.decodeChunkFrame`, so it is `""`) with its
 * decoded bytes, as `detach` leaves a chunk.
 */
export const attach = <P extends ChunkPayload>(payload: P, data: Uint8Array): P => {
  const attached: P & Detached = { ...payload, [Decoded]: Result.succeed(data) }
  return attached
}

/**
 * The chunk's decoded data, handed over once: from `detach` or `attach` when it ran (the payload then drops it, so a
 * second call is undefined), otherwise decoded from `data`; undefined without data.
 *
 * Why once: the received message outlives its handling in the young generation's eyes (the same mechanism that
 * promoted the chunk's text, above: something old and dead refers to it until the next full collection), and with
 * it the 64 KiB `ArrayBuffer` of the decoded data. Those buffers are external memory, and their sum made V8 run a
 * full mark-compact every ~340 chunks of a transfer (12 per 4,096 chunks, ~5.7 ms each, plus incremental marking:
 * about 30 µs of the daemon's time per chunk). Dropped here, each buffer dies with the step that wrote it.
 */
export const chunkBytes = (payload: ChunkPayload): ChunkResult | undefined => {
  const held = payload as Detached
  const decoded = held[Decoded]
  if (decoded === null) return undefined
  if (decoded !== undefined) {
    held[Decoded] = null
    return decoded
  }
  return payload.data === undefined ? undefined : decodeChunkData(payload.data)
}
