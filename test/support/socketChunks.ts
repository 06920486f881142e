import type { Socket } from "node:net"

/**
 * Feeds `wire` to `socket` as `data` events in chunks of the given sizes (cycled), each chunk its own buffer inside a
 * larger allocation, as a socket read's is (so code that takes views of a chunk sees a non-zero byte offset).
 */
export const feedChunks = (socket: Socket, wire: Buffer, chunkSizes: ReadonlyArray<number> = [wire.length]): void => {
  for (let at = 0, k = 0; at < wire.length; k++) {
    const size = Math.min(chunkSizes[k % chunkSizes.length]!, wire.length - at)
    const backing = Buffer.alloc(size + 16)
    wire.copy(backing, 8, at, at + size)
    socket.emit("data", backing.subarray(8, 8 + size))
    at += size
  }
}
