/**
 * Child role `gateway-host`: the process whose memory and CPU the scale suite measures. Mode `gateway` runs
 * Core's real gateway (`GatewayServer` with `DeviceCredentials.layerMemory` holding every bench device); mode
 * `devcore` runs the whole dev Core (`DevCore.layer`: gateway, operator API, SQLite store in a throwaway data
 * directory, declaration persistence) with every device in its store; mode `raw` runs the baseline, a plain
 * `ws` server on a Node HTTP server that accepts every upgrade and only takes each frame as text. Runs with
 * `--expose-gc`, so a measurement starts from a collected heap. Event-loop delay is sampled all along
 * (`monitorEventLoopDelay`, 1 ms resolution) and reported per measurement since the previous one, as the delay
 * itself: Node's histogram records the interval between two runs of its timer, i.e. the resolution plus the
 * delay (an idle process reads p50 1.1 / 10.1 / 20.2 ms at resolutions 1 / 10 / 20 ms), so the resolution is
 * taken out of every reading. A suite that never reads it starts the child with `loopMonitor: false` (the monitor's
 * own timer costs CPU that its baseline, measured elsewhere, would not pay).
 *
 * A memory reading with `collect` gives RSS twice: after a full GC (`rss`), and then after a memory-reducing one
 * (`rssReduced`, V8's "last resort" collection, as under memory pressure). The difference is mostly V8's young
 * generation: it grows (doubling, up to a size V8 derives from the machine's memory: 2 × 64 MiB on the 24 GiB
 * bench machine) while a burst of connections allocates, and a full GC does not shrink it, so it is a
 * per-process cost that lands in whichever step of connections V8 happened to grow it in (docs/performance.md,
 * "Core at scale"); the memory-reducing GC shrinks it and compacts the old generation.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, request, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver, type RecordableHistogram } from "node:perf_hooks"
import { Session } from "node:inspector/promises"
import { writeHeapSnapshot } from "node:v8"
import { WebSocketServer } from "ws"
import { type BenchDevice, type Core, startCore } from "../support/core.js"
import { type BenchDevCore, startDevCore } from "../support/devCore.js"
import { threadsCpuMicros } from "../support/threadCpu.js"

export type HostMode = "gateway" | "devcore" | "raw"

/** One operator GET with the bearer token: its status and whole body. */
const operatorGet = (url: string, token: string): Promise<{ status: number; body: Buffer }> =>
  new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
    })
    req.on("error", reject)
    req.end()
  })

export type HostCommand =
  | {
    readonly op: "start"
    readonly mode: HostMode
    readonly devices: ReadonlyArray<BenchDevice>
    readonly heartbeatSeconds: number
    /** devcore mode: the operator token to accept (the turns suite drives the operator API from the bench). */
    readonly operatorToken?: string
    /**
     * `false`: no event-loop delay monitor in this child (its 1 ms timer costs ≈ 25 µs of CPU per wake-up, 2–3 % of a
     * core, all charged to the measured process): for suites that never read loop delay (turns).
     */
    readonly loopMonitor?: boolean
  }
  /** devcore mode: store counters (`{op: "stats", turns, events, journalCommits}`). */
  | { readonly op: "stats" }
  /** devcore mode: `count` finished Turns of `sessionId` written straight into the store (`{op: "seeded"}`). */
  | { readonly op: "seed-turns"; readonly sessionId: string; readonly count: number }
  /** One operator GET (devcore mode) timed in this process: `{op: "got", ms, status, bytes, loopMaxMs}`. */
  | { readonly op: "get"; readonly path: string }
  /**
   * devcore mode: `path` and then further pages by their `next_cursor`, up to `pages` pages or the end, timed
   * as one: `{op: "got", ms, status (the last page's), bytes (pages read), loopMaxMs}`.
   */
  | { readonly op: "walk"; readonly path: string; readonly pages: number }
  /**
   * Memory after a full collection (`collect: true`; costs CPU) or CPU time alone. With `atMajorGcWithinMs`
   * (and no `collect`), the reading is taken as soon as the next major (mark-compact) GC has ended, or after that
   * many ms without one: the scale suite's CPU spans start and end at the end of an old-generation cycle, so a
   * span holds whole GC cycles (docs/performance.md, "idle2").
   */
  | { readonly op: "measure"; readonly collect: boolean; readonly atMajorGcWithinMs?: number }
  /** Writes a heap snapshot (diagnostics: docs/performance.md). */
  | { readonly op: "snapshot"; readonly path: string }
  /** Starts a CPU profile of this process's main thread, or stops it and writes it to `path` (`{op: "profiled"}`). */
  | { readonly op: "profile"; readonly path?: string }
  /**
   * Diagnostics: starts V8's sampling heap profiler (`intervalBytes`), or, with `path`, forces a full GC and writes
   * what the sampled allocations since the start still hold (objects still alive, by allocation stack) to `path`
   * (`{op: "heap-sampled"}`): what a cadence of heartbeats leaves alive (docs/performance.md, "scalemax"). (Reading the
   * profile runs a mark-compact of its own, so it cannot show what a scavenge kept but a mark-compact frees.)
   */
  | { readonly op: "heap-sample"; readonly path?: string; readonly intervalBytes?: number }
  | { readonly op: "exit" }

export interface HostMeasurement {
  readonly op: "measured"
  readonly rss: number
  readonly heapUsed: number
  readonly external: number
  /** RSS after a memory-reducing GC that followed the `rss` reading (`collect` only; else `rss`). */
  readonly rssReduced: number
  /** Process CPU time so far (user + system, every thread), microseconds. */
  readonly cpuMicros: number
  /** The system (kernel) part of `cpuMicros`. */
  readonly systemMicros: number
  /**
   * The main thread's part of `cpuMicros` (user + system; `process.threadCpuUsage`): the rest is other threads
   * (V8's concurrent GC, the SQLite worker, libuv's pool).
   */
  readonly mainThreadMicros: number
  /** The system (kernel) part of `mainThreadMicros`. */
  readonly mainThreadSystemMicros: number
  /** The SQLite store's worker thread's CPU so far (`/proc/self/task/<tid>/schedstat`), µs; NaN without one. */
  readonly workerMicros: number
  readonly frames: number
  /** Event-loop delay since the previous measurement (the monitor's resolution taken out): p99 and max, ms. */
  readonly loopP99Ms: number
  readonly loopMaxMs: number
  /** Major (mark-compact) GCs of the main isolate so far, the forced ones of `collect` readings included. */
  readonly majorGcs: number
  /** Whether the reading was taken right after a major GC ended (`atMajorGcWithinMs`; false: it timed out). */
  readonly atMajorGc: boolean
}

export interface HostGot {
  readonly op: "got"
  readonly ms: number
  readonly status: number
  readonly bytes: number
  /** The largest event-loop delay seen while the request ran (resolution taken out), milliseconds. */
  readonly loopMaxMs: number
  /** The main thread's CPU over the request, µs (`process.threadCpuUsage`: the route's work and the HTTP client's). */
  readonly mainCpuUs: number
  /** The whole process's CPU over the request, µs (every thread: the store's worker, V8's GC helpers). */
  readonly cpuUs: number
  /** The SQLite store's worker thread's CPU over the request, µs (`/proc/self/task/<tid>/schedstat`; NaN off Linux). */
  readonly workerCpuUs: number
  /** GC pauses of the main thread that began during the request (`PerformanceObserver` "gc"): count and total ms. */
  readonly gcCount: number
  readonly gcMs: number
}

/** The main thread's GC pauses (start, duration; ms on the performance clock), the last 4096. */
const gcPauses: Array<{ readonly start: number; readonly duration: number; readonly kind: number }> = []
/** Major GCs seen so far, and who waits for the next one's end (`measure` with `atMajorGcWithinMs`). */
let majorGcs = 0
const majorGcWaiters = new Set<() => void>()
let gcObserver: PerformanceObserver | undefined
const observeGc = () => {
  if (gcObserver !== undefined) return
  gcObserver = new PerformanceObserver((list) => {
    let major = false
    for (const e of list.getEntries()) {
      const kind = ((e as { detail?: { kind?: number } }).detail)?.kind ?? 0
      gcPauses.push({ start: e.startTime, duration: e.duration, kind })
      if (kind & perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
        majorGcs++
        major = true
      }
    }
    if (gcPauses.length > 4096) gcPauses.splice(0, gcPauses.length - 4096)
    if (major) for (const wake of [...majorGcWaiters]) wake()
  })
  gcObserver.observe({ entryTypes: ["gc"] })
}

/** Resolves true once the next major GC has ended (its entry observed), or false after `ms` without one. */
const nextMajorGc = (ms: number): Promise<boolean> =>
  new Promise((resolve) => {
    const wake = () => {
      clearTimeout(timer)
      majorGcWaiters.delete(wake)
      resolve(true)
    }
    const timer = setTimeout(() => {
      majorGcWaiters.delete(wake)
      resolve(false)
    }, ms)
    majorGcWaiters.add(wake)
  })

/** Runs `request` and reports its wall time, loop stall, CPU per thread and GC pauses (`HostGot` without op). */
const timed = async <A>(loop: Pick<RecordableHistogram, "reset" | "max">, request: () => Promise<A>): Promise<readonly [A, Omit<HostGot, "op" | "status" | "bytes">]> => {
  observeGc()
  loop.reset()
  const worker0 = threadsCpuMicros("WorkerThread")
  const cpu0 = process.cpuUsage()
  const main0 = process.threadCpuUsage()
  const t0 = performance.now()
  const a = await request()
  const t1 = performance.now()
  const main1 = process.threadCpuUsage()
  const cpu1 = process.cpuUsage()
  const worker1 = threadsCpuMicros("WorkerThread")
  const loopMaxMs = loopDelayMs(loop.max)
  // The observer's entries arrive in a later task.
  await new Promise((resolve) => setTimeout(resolve, 0))
  const pauses = gcPauses.filter((g) => g.start >= t0 && g.start <= t1)
  loop.reset()
  return [a, {
    ms: t1 - t0,
    loopMaxMs,
    mainCpuUs: main1.user + main1.system - main0.user - main0.system,
    cpuUs: cpu1.user + cpu1.system - cpu0.user - cpu0.system,
    workerCpuUs: worker1 - worker0,
    gcCount: pauses.length,
    gcMs: pauses.reduce((sum, g) => sum + g.duration, 0)
  }]
}

const collect = () => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) {
    gc()
    gc()
  }
}

type Gc = (options?: { readonly type: "major"; readonly execution: "sync"; readonly flavor: "last-resort" }) => void

/** A memory-reducing full GC (shrinks the young generation, compacts the old one). */
const collectReducing = () => (globalThis as { gc?: Gc }).gc?.({ type: "major", execution: "sync", flavor: "last-resort" })

/**
 * Diagnostics, off by default: `BENCH_HOST_LONGTASK_MS=<ms>` runs a 5 ms timer chain that records every gap longer
 * than that (a main-thread task or GC pause), and each `measure` logs them to stderr with the GC pauses (kind:
 * 1 minor, 2 major, 4 incremental, 8 weak callbacks) that overlap each one, so the loop max can be told apart.
 */
const longTaskSampler = (thresholdMs: number): (() => Array<string>) => {
  const found: Array<{ readonly start: number; readonly gap: number }> = []
  const periodMs = 5
  let last = performance.now()
  const tick = () => {
    const now = performance.now()
    const gap = now - last - periodMs
    if (gap > thresholdMs) found.push({ start: last + periodMs, gap })
    last = now
    setTimeout(tick, periodMs).unref()
  }
  setTimeout(tick, periodMs).unref()
  return () => {
    const lines = found.splice(0).map(({ start, gap }) => {
      const end = start + gap
      const gcs = gcPauses.filter((g) => g.start < end && g.start + g.duration > start)
      const gcMs = gcs.reduce((sum, g) => sum + g.duration, 0)
      return `longtask t=${(start / 1000).toFixed(3)}s gap=${gap.toFixed(1)}ms gc=${gcMs.toFixed(1)}ms ` +
        `[${gcs.map((g) => `k${g.kind}:${g.duration.toFixed(1)}`).join(",")}]`
    })
    return lines
  }
}

/** The event-loop monitor's timer period, ms. */
const LoopResolutionMs = 1
/** A reading of the monitor's histogram (the interval between its timer runs, ns) as the delay, ms. */
const loopDelayMs = (intervalNs: number): number => Math.max(0, intervalNs / 1e6 - LoopResolutionMs)

export const gatewayHost = async (): Promise<void> => {
  let core: Core | undefined
  let devCore: BenchDevCore | undefined
  let dataDir: string | undefined
  let raw: { server: Server; wss: WebSocketServer } | undefined
  let frames = 0
  let profiler: Session | undefined
  let heapSampler: Session | undefined
  const loop = monitorEventLoopDelay({ resolution: LoopResolutionMs })
  // Enabled from the start (a suite's first reading covers its start-up), unless the start command turns it off.
  loop.enable()
  observeGc()
  const longTaskMs = Number(process.env["BENCH_HOST_LONGTASK_MS"] ?? "")
  const longTasks = longTaskMs > 0 ? longTaskSampler(longTaskMs) : undefined
  process.on("message", async (message: HostCommand) => {
    try {
      switch (message.op) {
        case "start": {
          if (message.loopMonitor === false) loop.disable()
          if (message.mode === "gateway") {
            core = await startCore(message.devices, { heartbeatSeconds: message.heartbeatSeconds })
            process.send?.({ op: "started", baseUrl: core.baseUrl })
          } else if (message.mode === "devcore") {
            dataDir = mkdtempSync(join(tmpdir(), "agentwire-bench-devcore-"))
            devCore = await startDevCore(dataDir, message.devices, message.heartbeatSeconds, message.operatorToken)
            process.send?.({ op: "started", baseUrl: devCore.baseUrl })
          } else {
            const server = createServer((_, res) => res.writeHead(404).end())
            const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 4 * 1024 * 1024 })
            wss.on("connection", (ws) => ws.on("message", (data) => {
              frames++
              void String(data)
            }))
            await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
            raw = { server, wss }
            process.send?.({ op: "started", baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
          }
          return
        }
        case "measure": {
          const atMajorGc = !message.collect && message.atMajorGcWithinMs !== undefined
            ? await nextMajorGc(message.atMajorGcWithinMs)
            : false
          if (longTasks !== undefined) {
            for (const line of longTasks()) process.stderr.write(`${line}\n`)
            process.stderr.write(`measure t=${(performance.now() / 1000).toFixed(3)}s loopMax=${loopDelayMs(loop.max).toFixed(1)}ms\n`)
          }
          if (message.collect) collect()
          const memory = process.memoryUsage()
          const cpu = process.cpuUsage()
          const thread = process.threadCpuUsage()
          process.send?.({
            op: "measured",
            rss: memory.rss,
            heapUsed: memory.heapUsed,
            external: memory.external,
            rssReduced: message.collect ? (collectReducing(), process.memoryUsage().rss) : memory.rss,
            cpuMicros: cpu.user + cpu.system,
            systemMicros: cpu.system,
            mainThreadMicros: thread.user + thread.system,
            mainThreadSystemMicros: thread.system,
            workerMicros: threadsCpuMicros("WorkerThread"),
            frames,
            loopP99Ms: loopDelayMs(loop.percentile(99)),
            loopMaxMs: loopDelayMs(loop.max),
            majorGcs,
            atMajorGc
          } satisfies HostMeasurement)
          loop.reset()
          return
        }
        case "get": {
          if (devCore === undefined) throw new Error("get needs mode devcore")
          const url = `${devCore.baseUrl}${message.path}`
          const token = devCore.operatorToken
          const [{ body, status }, t] = await timed(loop, () => operatorGet(url, token))
          process.send?.({ op: "got", status, bytes: body.byteLength, ...t } satisfies HostGot)
          return
        }
        case "walk": {
          if (devCore === undefined) throw new Error("walk needs mode devcore")
          const { baseUrl, operatorToken: token } = devCore
          const walk = async () => {
            let pages = 0
            let status = 0
            let path: string | null = message.path
            while (path !== null && pages < message.pages) {
              const page = await operatorGet(`${baseUrl}${path}`, token)
              pages++
              status = page.status
              const next = status === 200 ? (JSON.parse(page.body.toString("utf8")) as { next_cursor: string | null }).next_cursor : null
              path = next === null ? null : `${message.path}&cursor=${encodeURIComponent(next)}`
            }
            return { pages, status }
          }
          const [{ pages, status }, t] = await timed(loop, walk)
          process.send?.({ op: "got", status, bytes: pages, ...t } satisfies HostGot)
          return
        }
        case "stats": {
          if (devCore === undefined) throw new Error("stats needs mode devcore")
          process.send?.({ op: "stats", ...(await devCore.stats()) })
          return
        }
        case "seed-turns": {
          if (devCore === undefined) throw new Error("seed-turns needs mode devcore")
          await devCore.seedTurns(message.sessionId, message.count)
          process.send?.({ op: "seeded" })
          return
        }
        case "snapshot": {
          collect()
          process.send?.({ op: "snapshot-written", path: writeHeapSnapshot(message.path) })
          return
        }
        case "profile": {
          // Diagnostics: a CPU profile of a chosen window only (not the start-up or the connecting phase).
          if (message.path === undefined) {
            profiler = new Session()
            profiler.connect()
            await profiler.post("Profiler.enable")
            await profiler.post("Profiler.start")
          } else if (profiler !== undefined) {
            const { profile } = await profiler.post("Profiler.stop")
            writeFileSync(message.path, JSON.stringify(profile))
            profiler.disconnect()
            profiler = undefined
          }
          process.send?.({ op: "profiled" })
          return
        }
        case "heap-sample": {
          if (message.path === undefined) {
            heapSampler = new Session()
            heapSampler.connect()
            await heapSampler.post("HeapProfiler.enable")
            await heapSampler.post("HeapProfiler.startSampling", { samplingInterval: message.intervalBytes ?? 1024 })
          } else if (heapSampler !== undefined) {
            collect()
            const { profile } = await heapSampler.post("HeapProfiler.getSamplingProfile")
            await heapSampler.post("HeapProfiler.stopSampling")
            writeFileSync(message.path, JSON.stringify(profile))
            heapSampler.disconnect()
            heapSampler = undefined
          }
          process.send?.({ op: "heap-sampled" })
          return
        }
        case "exit": {
          if (core !== undefined) await core.dispose()
          if (devCore !== undefined) await devCore.dispose()
          if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
          if (raw !== undefined) {
            for (const client of raw.wss.clients) client.terminate()
            raw.server.closeAllConnections()
            raw.server.close()
          }
          process.exit(0)
        }
      }
    } catch (error) {
      process.send?.({ op: "error", message: error instanceof Error ? error.message : String(error) })
    }
  })
  process.on("disconnect", () => process.exit(0))
  await new Promise<never>(() => {})
}
