/**
 * The raw `ws` baselines' chunk frames, built the way the daemon path builds its own
 * (`EncodedFrame.encodeChunkFrame`): the JSON text around an empty `data` once, the base64 text of the chunk
 * written into the frame's bytes, and those bytes sent as a text frame (`{ binary: false }`). Before 2026-12-02
 * 15:30 UTC the baselines ran the 87 KiB base64 text of every chunk through `JSON.stringify` and `ws`'s own string
 * conversion, about 200 µs per chunk that an efficient sender does not spend (the daemon path stopped spending it
 * earlier the same day): an artificially slow bar.
 */

/** The frame `{...envelope, payload: {...payload, data: base64(bytes)}}` as UTF-8 bytes. */
export const chunkFrame = (
  envelope: { readonly type: string; readonly id: string; readonly payload: Record<string, unknown> },
  bytes: Uint8Array
): Buffer => {
  const text = JSON.stringify({ ...envelope, payload: { ...envelope.payload, data: "" } })
  const at = text.indexOf(`"data":""`) + `"data":"`.length
  const head = text.slice(0, at)
  const tail = text.slice(at)
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64")
  const frame = Buffer.allocUnsafe(Buffer.byteLength(head) + data.length + Buffer.byteLength(tail))
  let offset = frame.write(head, 0, "utf8")
  offset += frame.write(data, offset, "latin1")
  frame.write(tail, offset, "utf8")
  return frame
}

/** `ws.send` options for a frame given as bytes: still a text frame. */
export const textFrame = { binary: false } as const
