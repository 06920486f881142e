/**
 * Diagnostic switch of the `runtime-peer` child (off by default; docs/performance.md, relaydaemon paragraph):
 * `BENCH_RELAY_DIAG=<file>` appends one JSON line to `<file>` per `cpu` command with what this process did since the
 * previous one: CPU user / system (the process's, and the main thread's alone: the rest is V8's and libuv's worker
 * threads), minor faults, voluntary / involuntary context switches, GC count and time by
 * kind (`perf_hooks`), socket writes (calls, bytes, the handle's single and vector writes, the largest write
 * buffer), event-loop utilization, and the heap's used / committed sizes. The relay suite reads a child's CPU with
 * one `cpu` before and one after each of its rounds, so the lines alternate between a round and the span between
 * two rounds (`n` 0 is everything before the first `cpu`). GC entries arrive asynchronously: one that ends just
 * before a `cpu` command may be counted in the next line. Counts only: the figures are the suite's.
 */
import { appendFileSync } from "node:fs"
import { Socket } from "node:net"
import { constants, type EventLoopUtilization, PerformanceObserver, performance } from "node:perf_hooks"
import { getHeapStatistics } from "node:v8"

interface Counts {
  writes: number
  writeBytes: number
  handleWrites: number
  handleWritevs: number
  writevChunks: number
  maxBuffered: number
  gcMinor: number
  gcMajor: number
  gcOther: number
  gcMinorMs: number
  gcMajorMs: number
  gcOtherMs: number
}

const zero = (): Counts => ({
  writes: 0,
  writeBytes: 0,
  handleWrites: 0,
  handleWritevs: 0,
  writevChunks: 0,
  maxBuffered: 0,
  gcMinor: 0,
  gcMajor: 0,
  gcOther: 0,
  gcMinorMs: 0,
  gcMajorMs: 0,
  gcOtherMs: 0
})

/** Starts counting when the switch is set; returns what to call on each `cpu` command (a no-op otherwise). */
export const relayDiag = (role: () => string): (() => void) => {
  const file = process.env["BENCH_RELAY_DIAG"]
  if (file === undefined || file === "") return () => {}
  let counts = zero()
  type Proto = Record<string, (...args: Array<unknown>) => unknown>
  const proto = Socket.prototype as unknown as Proto
  const write = proto["write"]!
  proto["write"] = function(this: Socket, ...args: Array<unknown>) {
    counts.writes++
    const data = args[0]
    counts.writeBytes += typeof data === "string" ? Buffer.byteLength(data) : (data as Uint8Array).byteLength
    const r = write.apply(this, args)
    if (this.writableLength > counts.maxBuffered) counts.maxBuffered = this.writableLength
    return r
  }
  const writeGeneric = proto["_writeGeneric"]
  if (writeGeneric !== undefined) {
    proto["_writeGeneric"] = function(this: Socket, writev: unknown, data: unknown, ...rest: Array<unknown>) {
      if (writev === true) {
        counts.handleWritevs++
        counts.writevChunks += (data as Array<unknown>).length
      } else counts.handleWrites++
      return writeGeneric.call(this, writev, data, ...rest)
    }
  }
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as unknown as { readonly detail?: { readonly kind?: number } }).detail?.kind
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        counts.gcMinor++
        counts.gcMinorMs += entry.duration
      } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        counts.gcMajor++
        counts.gcMajorMs += entry.duration
      } else {
        counts.gcOther++
        counts.gcOtherMs += entry.duration
      }
    }
  }).observe({ entryTypes: ["gc"] })
  let usage = process.resourceUsage()
  let main = process.threadCpuUsage()
  let elu: EventLoopUtilization = performance.eventLoopUtilization()
  let at = performance.now()
  let n = 0
  return () => {
    const u = process.resourceUsage()
    const m = process.threadCpuUsage(main)
    const e = performance.eventLoopUtilization(elu)
    const now = performance.now()
    const heap = getHeapStatistics()
    appendFileSync(
      file,
      JSON.stringify({
        pid: process.pid,
        role: role(),
        n: n++,
        ms: +(now - at).toFixed(2),
        userUs: u.userCPUTime - usage.userCPUTime,
        sysUs: u.systemCPUTime - usage.systemCPUTime,
        mainUs: m.user + m.system,
        minflt: u.minorPageFault - usage.minorPageFault,
        vcsw: u.voluntaryContextSwitches - usage.voluntaryContextSwitches,
        ivcsw: u.involuntaryContextSwitches - usage.involuntaryContextSwitches,
        eluActiveMs: +e.active.toFixed(2),
        eluIdleMs: +e.idle.toFixed(2),
        ...counts,
        gcMinorMs: +counts.gcMinorMs.toFixed(2),
        gcMajorMs: +counts.gcMajorMs.toFixed(2),
        gcOtherMs: +counts.gcOtherMs.toFixed(2),
        heapUsedMB: +(heap.used_heap_size / 1048576).toFixed(1),
        heapTotalMB: +(heap.total_heap_size / 1048576).toFixed(1)
      }) + "\n"
    )
    usage = u
    main = process.threadCpuUsage()
    elu = performance.eventLoopUtilization()
    at = now
    counts = zero()
  }
}
