/**
 * The end of a socket read as a point where batched work can run (issue 18). A transport that hands frames to
 * its handlers synchronously from one socket read (`internal/webSocket.ts`: every frame `ws` parses from one
 * chunk) brackets the read with `begin` / `end`; work queued meanwhile with `atReadEnd` runs once, at `end`,
 * still inside the read's job. Without a bracket (another transport, frames a paused read side delivers later)
 * `atReadEnd` answers false and the caller uses a microtask, as before.
 *
 * Why: the read side batches its inbound frame counts per read (`CoreMetrics.inboundUnsafe`). With a microtask
 * per read that batch cost an idle device one queued microtask (and, with async context in use, its
 * `AsyncResource` and bound function, ~170 B) per heartbeat, a read of one frame.
 */

/** Reads in progress (nested when a handler's work reads another socket synchronously). */
let depth = 0
/**
 * Work for the end of the outermost read in progress: the first `size` slots. The array keeps its length (a
 * `length = 0` would drop its backing store, and the next read's `push` allocate a new one).
 */
const queued: Array<(() => void) | undefined> = []
let size = 0

/** Queues `work` for the end of the current socket read; false (nothing queued) outside one. */
export const atReadEnd = (work: () => void): boolean => {
  if (depth === 0) return false
  queued[size++] = work
  return true
}

/** A transport starts handing over one socket read's frames. */
export const begin = (): void => {
  depth++
}

/** The read `begin` opened is over: at the outermost one, queued work runs, in queue order. */
export const end = (): void => {
  if (--depth > 0 || size === 0) return
  // Work queued while this runs is past the read (depth 0): `atReadEnd` refuses it.
  const n = size
  size = 0
  for (let i = 0; i < n; i++) {
    const work = queued[i]!
    queued[i] = undefined
    work()
  }
}
