/**
 * The synchronous chunk write of a workspace write's and a transfer's staging file.
 */
import * as Fs from "node:fs"
import { errnoReason, SafeFsError } from "./safeFs.js"

/**
 * Writes all of `data` at `offset` of an open file, synchronously (a short write is retried; no progress is `io`).
 * Used for the chunks of a write or a transfer: a 64 KiB write into the page cache costs less than the thread
 * pool's round trip (two thread hand-offs per chunk, each a scheduling delay on a loaded machine), and while a
 * write or a transfer is received no Run or Executor is live on the daemon (both exclude them and new work), so
 * the event loop holds back nothing that waits on it but the connection's own frames.
 */
export const writeAllSync = (fd: number, data: Uint8Array, offset: number): void => {
  let done = 0
  while (done < data.length) {
    let written: number
    try {
      written = Fs.writeSync(fd, data, done, data.length - done, offset + done)
    } catch (e) {
      throw new SafeFsError(errnoReason(e))
    }
    if (written === 0) throw new SafeFsError("io")
    done += written
  }
}
