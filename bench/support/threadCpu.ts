/**
 * CPU time of this process's threads by name, from `/proc/self/task/<tid>/schedstat` (Linux; its first field is
 * the thread's time on a CPU in nanoseconds, unlike `stat`'s 10 ms ticks, fine enough for one request). The
 * scale suite's host reads the SQLite store's worker thread with it (an unnamed `worker_threads` Worker is
 * named `WorkerThread`; the dev Core runs one, the store's). NaN when not on Linux or no thread has the name.
 */
import { readdirSync, readFileSync } from "node:fs"

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** The summed on-CPU time of this process's threads named `comm` so far, microseconds (NaN when none). */
export const threadsCpuMicros = (comm: string): number => {
  let tids: Array<string>
  try {
    tids = readdirSync("/proc/self/task")
  } catch {
    return Number.NaN
  }
  let ns = 0
  let found = false
  for (const tid of tids) {
    if (read(`/proc/self/task/${tid}/comm`)?.trim() !== comm) continue
    const run = Number(read(`/proc/self/task/${tid}/schedstat`)?.split(" ")[0])
    if (!Number.isFinite(run)) continue
    ns += run
    found = true
  }
  return found ? ns / 1000 : Number.NaN
}
