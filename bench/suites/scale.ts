/**
 * Scale suite (issues 8 item 4 and 18): memory per idle device connection, heartbeat CPU and event-loop delay
 * at growing numbers of concurrent connections from one load process, and the operator device listing at the
 * largest level. Three processes: the bench orchestrates, `gateway-host` is the measured process (the whole dev
 * Core with its SQLite store and declaration persistence; Core's bare gateway with an in-memory credential
 * store; or the raw `ws` baseline server), `load` holds the connections (bootstrap + dial + heartbeats, as a
 * daemon does).
 *
 * Per level, after connecting and a settle: first memory after a full GC (RSS and per-device growth over the same
 * process before any connection; judged after a memory-reducing GC, which gives back V8's young generation, a
 * per-process buffer that a burst of connections grows once and a full GC keeps: gatewayHost.ts), twice, at this
 * fixed place (read after the CPU span, it moved with how long the span had waited for its GCs: docs/performance.md,
 * "gcwait", "memfirst"). Then CPU at the real 15 s heartbeat cadence (full runs): the measured share of a core (minus
 * the process's idle CPU) and that CPU divided by the heartbeats sent meanwhile. At the judged levels (all but the
 * first) it is taken over whole old-generation GC cycles: 30 s after the memory readings (whose forced GCs, the
 * memory-reducing one above all, put the heap in a transient a Core that never forces a GC is not in: "idle3",
 * "idlemeas"), from the end of the next major GC, through two windows of one whole cadence each, to the end of the
 * first major GC after them, each waited for at most 180 s (at 10k idle devices a mark-compact of the dev Core's heap
 * costs as much CPU as thousands of heartbeats, so a 5 s window read 60-170 µs per heartbeat depending on whether
 * one fell in it; at idle the major GCs are about 106 s apart). Raw `ws` is measured the same way. The per-window
 * readings are reported in the notes, the event-loop figures are per window. "Flat" is the last level against the
 * middle one (the first carries one-time costs).
 *
 * The operator page (`GET /operator/devices?limit=50`, first page, devcore only) is judged on requests made first at
 * each level, right after connecting and the settle, while heartbeats run, spaced over a second or two
 * (docs/performance.md, "Device page", "pagefirst"): not after the memory readings and the idle span (the young
 * generation at its smallest: each request met a scavenge, 12 of 15 at 10k), and not right after the forced GCs,
 * whose tightened heap limit makes V8 start an incremental marking of the whole heap at the next allocations, so the marking of every device's objects (work that grows with the device
 * count, paid by whatever runs then) landed in the few requests timed there. Those three requests are still made
 * and reported in a note. Negative control: as many pages as the level has devices / 50, read by following
 * `next_cursor` (work proportional to the level by construction, through the same route; every level's store holds
 * all the devices, so a walk to the end would not grow), timed the same way right after; it must miss the
 * flatness target. The flatness is judged on the Core's CPU per request (main thread + store worker, net of the
 * threads' background rate: support/devicePage.ts), not on wall clock, which varies with the machine's load and
 * with the GC pauses other work's garbage causes; wall time and stall stay judged per request.
 */
import { figure, type Figure, lastVsMiddle, marginalLastVsMiddle, unjudgedBecause } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import type { HostGot, HostMeasurement, HostMode } from "../children/gatewayHost.js"
import { type BenchDevice, makeDevices } from "../support/core.js"
import { type Background, devicePageFigures } from "../support/devicePage.js"
import { type Child, op, spawnChild } from "../support/processes.js"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface Level {
  readonly devices: number
  /** Connections opened per second while growing to this level (gateway: bootstrap + dial; raw: dial). */
  readonly connectRate: number
  /** RSS after GC, bytes, per memory sample. */
  readonly rss: Array<number>
  /** (RSS − RSS with no connection) / devices, bytes, per memory sample. */
  readonly perDevice: Array<number>
  /** The same after a memory-reducing GC (V8's young generation shrunk, the old one compacted), on both sides. */
  readonly perDeviceReduced: Array<number>
  /** RSS after a memory-reducing GC, bytes, per memory sample. */
  readonly rssAfterReducing: Array<number>
  /** The same for the JS heap in use (the rest of the growth is native: sockets, buffers, code). */
  readonly heapPerDevice: Array<number>
  /** Host CPU per heartbeat sent, microseconds, per window, after the idle process's own CPU is taken out. */
  readonly cpuPerHeartbeat: Array<number>
  /** Host CPU share of one core, per window, after the idle process's own CPU is taken out. */
  readonly cpuShare: Array<number>
  /**
   * The judged CPU reading: the whole span of the windows, from the end of a major GC before the first window to
   * the end of the first major GC after the last one (`span.aligned`: both ends found within `gcWaitMs`), so it
   * holds whole old-generation cycles; at the first level (not judged) the windows alone.
   */
  span: Span
  /** Event-loop delay p99 and max per window, ms. */
  readonly loopP99: Array<number>
  readonly loopMax: Array<number>
  /** First-page timings at this level (devcore only), right after connecting, heartbeats running: judged. */
  readonly page: Array<HostGot>
  /** The same request right after the forced GCs of the memory reading (not judged; see the header). */
  readonly pageAfterGc: Array<HostGot>
  /** The negative control: the whole listing page by page, timed as `page` and right after it. */
  readonly walk: Array<HostGot>
  /** The main and store worker threads' CPU per ms over the last CPU window (the page's CPU is net of it). */
  background: Background
}

const measure = async (host: Child, collect: boolean, atMajorGcWithinMs?: number): Promise<HostMeasurement> => {
  host.send({ op: "measure", collect, ...(atMajorGcWithinMs === undefined ? {} : { atMajorGcWithinMs }) })
  return host.next((m): m is HostMeasurement => op("measured")(m), 60_000 + (atMajorGcWithinMs ?? 0))
}
/** CPU over one span of consecutive windows (see `Level.span`). */
interface Span {
  readonly perHeartbeat: number
  readonly share: number
  readonly seconds: number
  readonly heartbeats: number
  /** Major GCs that ended inside the span (its last one included, the one it starts after not). */
  readonly majorGcs: number
  readonly aligned: boolean
}

const heartbeatsSent = async (load: Child): Promise<number> => {
  load.send({ op: "count" })
  const reply = await load.next(op("count"))
  return reply["heartbeats"] as number
}

const runMode = async (
  ctx: SuiteContext,
  mode: HostMode,
  devices: ReadonlyArray<BenchDevice>,
  levels: ReadonlyArray<number>,
  p: {
    readonly heartbeatSeconds: number
    readonly windows: number
    readonly windowMs: number
    readonly settleMs: number
    /** After the memory readings' forced GCs, before the CPU span starts waiting for its first major GC. */
    readonly recoverMs: number
    /**
     * Levels after the first: the span starts at the end of the next major GC and ends at the end of the first one
     * after the last window, each waited for at most this long (0: windows alone, as a quick run).
     */
    readonly gcWaitMs: number
    /** Page requests per level, and the pause between two of them, ms; control listings per level. */
    readonly pageSamples: number
    readonly pageGapMs: number
    readonly controlSamples: number
  }
): Promise<{ readonly levels: Array<Level>; readonly emptyRss: number; readonly emptyRssReduced: number }> => {
  const host = spawnChild(ctx.self, "gateway-host", { execArgv: ["--expose-gc"] })
  const load = spawnChild(ctx.self, "load")
  try {
    host.send({ op: "start", mode, devices: mode === "raw" ? [] : devices, heartbeatSeconds: p.heartbeatSeconds })
    const started = await host.next(op("started"), 120_000)
    const baseUrl = started["baseUrl"] as string
    await sleep(p.settleMs)
    const empty = await measure(host, true)
    const emptyRss = empty.rss
    const emptyRssReduced = empty.rssReduced
    // The process's own CPU with no connection (timers, GC), per millisecond: taken out of every window.
    const idleFrom = await measure(host, false)
    const idleAt = performance.now()
    await sleep(p.windowMs)
    const idleTo = await measure(host, false)
    const idleMicrosPerMs = (idleTo.cpuMicros - idleFrom.cpuMicros) / (performance.now() - idleAt)
    const out: Array<Level> = []
    let connected = 0
    for (const n of levels) {
      ctx.log(`scale: ${mode}: connecting ${n - connected} more devices (to ${n})`)
      const t0 = performance.now()
      load.send({ op: "connect", mode: mode === "raw" ? "raw" : "gateway", baseUrl, devices: devices.slice(connected, n), heartbeatSeconds: p.heartbeatSeconds })
      const reply = await load.next(op("connected"), 600_000)
      if ((reply["failed"] as number) > 0) {
        throw new Error(`scale: ${reply["failed"]} of ${n - connected} connections failed (${reply["firstFailure"]}); logs: ${host.logFile}, ${load.logFile}`)
      }
      const elapsed = performance.now() - t0
      ctx.log(`scale: ${mode}: ${n} connected in ${Math.round(elapsed)} ms (${reply["retries"] ?? 0} retried); measuring`)
      const connectRate = ((n - connected) * 1000) / elapsed
      connected = n
      await sleep(p.settleMs)
      const level: Level = {
        devices: n,
        connectRate,
        rss: [],
        perDevice: [],
        perDeviceReduced: [],
        rssAfterReducing: [],
        heapPerDevice: [],
        cpuPerHeartbeat: [],
        cpuShare: [],
        span: { perHeartbeat: Number.NaN, share: Number.NaN, seconds: 0, heartbeats: 0, majorGcs: 0, aligned: false },
        loopP99: [],
        loopMax: [],
        page: [],
        pageAfterGc: [],
        walk: [],
        background: { mainPerMs: 0, workerPerMs: 0 }
      }
      const memory = async () => {
        const m = await measure(host, true)
        level.rss.push(m.rss)
        level.perDevice.push((m.rss - emptyRss) / n)
        level.rssAfterReducing.push(m.rssReduced)
        level.perDeviceReduced.push((m.rssReduced - emptyRssReduced) / n)
        level.heapPerDevice.push((m.heapUsed - empty.heapUsed) / n)
      }
      const got = async (command: { readonly op: "get"; readonly path: string } | { readonly op: "walk"; readonly path: string; readonly pages: number }) => {
        host.send(command)
        return host.next((m): m is HostGot => op("got")(m), 120_000)
      }
      const pagePath = "/api/v1/operator/devices?limit=50"
      // The operator page first (devcore), right after connecting and the settle: after the memory readings and the
      // idle span, V8's young generation is at its smallest and the requests met scavenges whose cost grows with the
      // devices (docs/performance.md, "pagefirst").
      if (mode === "devcore") {
        for (let k = 0; k < p.pageSamples; k++) {
          await sleep(p.pageGapMs)
          level.page.push(await got({ op: "get", path: pagePath }))
        }
        for (let k = 0; k < p.controlSamples; k++) {
          await sleep(p.pageGapMs)
          level.walk.push(await got({ op: "walk", path: pagePath, pages: Math.ceil(n / 50) }))
        }
      }
      // Memory first, at a fixed place (right after connecting and the settle; two readings), with the 3 operator
      // requests right after the first one's forced GCs (a note): read after the CPU span, it moved with how long the
      // span had waited for its GCs (docs/performance.md, "gcwait", "memfirst").
      await memory()
      if (mode === "devcore") {
        for (let k = 0; k < 3; k++) level.pageAfterGc.push(await got({ op: "get", path: pagePath }))
      }
      await memory()
      // Levels after the first (the judged ones: the top level's share, the flatness of the top vs the middle) are
      // measured over whole old-generation cycles, after the transient the forced GCs leave (the smallest young
      // generation, an old-generation limit at 1.1× the live heap; "idle3"): a 5 s window read 60-170 µs per heartbeat
      // depending on whether a mark-compact fell in it (docs/performance.md, "idle2").
      const gcWaitMs = out.length > 0 ? p.gcWaitMs : 0
      if (gcWaitMs > 0) await sleep(p.recoverMs)
      const waitFrom = performance.now()
      let previous = await measure(host, false, gcWaitMs > 0 ? gcWaitMs : undefined)
      const waitedMs = performance.now() - waitFrom
      const first = previous
      let cpu = previous.cpuMicros
      let sent = await heartbeatsSent(load)
      let at = performance.now()
      const spanFrom = { sent, at }
      const busySince = (from: HostMeasurement, fromAt: number, to: HostMeasurement, toAt: number) =>
        Math.max(0, to.cpuMicros - from.cpuMicros - idleMicrosPerMs * (toAt - fromAt))
      // The first level (not judged) gets one window: one whole heartbeat cadence at a full run.
      for (let w = 0; w < (out.length > 0 ? p.windows : 1); w++) {
        await sleep(p.windowMs)
        const m = await measure(host, false)
        const cpuNow = m.cpuMicros
        const sentNow = await heartbeatsSent(load)
        const now = performance.now()
        const busy = Math.max(0, cpuNow - cpu - idleMicrosPerMs * (now - at))
        level.cpuPerHeartbeat.push(busy / Math.max(1, sentNow - sent))
        level.cpuShare.push(busy / 1000 / (now - at))
        level.loopP99.push(m.loopP99Ms)
        level.loopMax.push(m.loopMaxMs)
        level.background = {
          mainPerMs: (m.mainThreadMicros - previous.mainThreadMicros) / (now - at),
          workerPerMs: Number.isFinite(m.workerMicros) ? (m.workerMicros - previous.workerMicros) / (now - at) : 0
        }
        previous = m
        cpu = cpuNow
        sent = sentNow
        at = now
      }
      const last = gcWaitMs > 0 ? await measure(host, false, gcWaitMs) : previous
      const lastSent = gcWaitMs > 0 ? await heartbeatsSent(load) : sent
      const lastAt = gcWaitMs > 0 ? performance.now() : at
      const busy = busySince(first, spanFrom.at, last, lastAt)
      level.span = {
        perHeartbeat: busy / Math.max(1, lastSent - spanFrom.sent),
        share: busy / 1000 / (lastAt - spanFrom.at),
        seconds: (lastAt - spanFrom.at) / 1000,
        heartbeats: lastSent - spanFrom.sent,
        majorGcs: last.majorGcs - first.majorGcs,
        aligned: first.atMajorGc && last.atMajorGc
      }
      ctx.log(`scale: ${mode}: ${n}: ${level.span.perHeartbeat.toFixed(1)} µs per heartbeat over ${level.span.seconds.toFixed(1)} s, ` +
        `${level.span.majorGcs} major GCs${level.span.aligned ? "" : gcWaitMs > 0 ? " (not aligned: no major GC within the wait)" : ""}` +
        ` (after waiting ${(waitedMs / 1000).toFixed(1)} s for its start)`)
      out.push(level)
    }
    return { levels: out, emptyRss, emptyRssReduced }
  } finally {
    await load.stop()
    await host.stop()
  }
}


const formatMiB = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!

/**
 * Per memory sample: RSS growth (after a memory-reducing GC) per added device over the last step, over the growth
 * per device over the middle step (the first step, from 0, carries the process's one-time costs).
 */
const marginalRatios = (run: { readonly levels: ReadonlyArray<Level>; readonly emptyRssReduced: number }): Array<number> =>
  run.levels[0]!.rssAfterReducing.map((_, i) =>
    marginalLastVsMiddle(run.levels.map((l) => l.devices), run.levels.map((l) => l.rssAfterReducing[i]!), run.emptyRssReduced))

export const scaleSuite: Suite = {
  name: "scale",
  describe: "dev Core / gateway memory per idle device, heartbeat CPU at the real cadence, event-loop delay, device listing",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const levels = ctx.quick ? [200, 500, 1000] : [1000, 5000, 10_000]
    // Full runs measure at the real 15 s cadence (the default bootstrap returns); quick runs judge nothing.
    const p = ctx.quick
      ? { heartbeatSeconds: 5, windows: 2, windowMs: 2500, settleMs: 1000, recoverMs: 0, gcWaitMs: 0, pageSamples: 5, pageGapMs: 100, controlSamples: 3 }
      : { heartbeatSeconds: 15, windows: 2, windowMs: 15_000, settleMs: 3000, recoverMs: 30_000, gcWaitMs: 180_000, pageSamples: 15, pageGapMs: 100, controlSamples: 5 }
    const devices = makeDevices("scale", levels[levels.length - 1]!)
    // BENCH_SCALE_MODES=raw,devcore (diagnostics, paired runs): only these hosts; raw ws is always measured.
    const only = process.env["BENCH_SCALE_MODES"]?.split(",").map((m) => m.trim())
    const wanted = (mode: HostMode) => mode === "raw" || only === undefined || only.includes(mode)
    const raw = await runMode(ctx, "raw", devices, levels, p)
    const gateway = wanted("gateway") ? await runMode(ctx, "gateway", devices, levels, p) : undefined
    const devcore = wanted("devcore") ? await runMode(ctx, "devcore", devices, levels, p) : undefined
    const figures: Array<Figure> = []
    const kib = (xs: ReadonlyArray<number>) => xs.map((x) => x / 1024)
    const top = levels.length - 1
    const mid = Math.floor(top / 2)
    // Judged over whole old-generation cycles only: a span that found no major GC at one of its ends within the
    // wait leaves that cycle's collection out (full run 2026-12-04 16:49: the gateway's 5000 level read 24.4 µs
    // per heartbeat with none, the 10,000 level 34.1 with one, a quotient of 1.40 that measured the GC, not growth).
    const overCycles = (f: Figure, judgedLevels: ReadonlyArray<Level>): Figure => {
      const partial = p.gcWaitMs > 0 ? judgedLevels.filter((l) => !l.span.aligned) : []
      return partial.length === 0 ? f : unjudgedBecause(f, `the span at ${partial.map((l) => l.devices).join(" and ")} devices ` +
        `found no major GC at one end within ${p.gcWaitMs / 1000} s, so it does not hold whole old-generation cycles`)
    }
    const spanNote = (l: Level) =>
      `${l.span.seconds.toFixed(0)} s, ${l.span.heartbeats} heartbeats, ${l.span.majorGcs} major GCs` +
      `${l.span.aligned || l.devices === levels[0] ? "" : ", not both ends at a major GC"}; ` +
      `per ${p.windowMs / 1000} s window ${l.cpuPerHeartbeat.map((x) => x.toFixed(0)).join(" / ")} µs`
    const runs = [["dev Core", devcore], ["gateway", gateway]] as const
    for (const [label, run] of runs) {
      if (run === undefined) continue
      for (let i = 0; i < levels.length; i++) {
        const g = run.levels[i]!
        const r = raw.levels[i]!
        figures.push(
          figure({
            suite: "scale",
            name: `${label}: memory per idle device @ ${g.devices}`,
            unit: "KiB",
            samples: kib(g.perDevice),
            baseline: { name: "raw ws", samples: kib(r.perDevice) },
            note: "RSS growth per device after a full GC, V8's young generation included"
          }),
          figure({
            suite: "scale",
            name: `${label}: memory per idle device after a memory-reducing GC @ ${g.devices}`,
            unit: "KiB",
            samples: kib(g.perDeviceReduced),
            baseline: { name: "raw ws", samples: kib(r.perDeviceReduced) },
            ...(label === "dev Core" && i === top ? { target: { on: "value", op: "<=", value: 16 } } : {}),
            note: `after a full GC, then a memory-reducing one: ${g.rss.length > 0 ? formatMiB(g.rss[g.rss.length - 1]! - g.rssAfterReducing[g.rssAfterReducing.length - 1]!) : "?"} ` +
              `(RSS given back by the memory-reducing GC: mostly V8's young generation, a per-process buffer a burst of allocation grows once and a full GC keeps)`
          }),
          figure({
            suite: "scale",
            name: `${label}: CPU per heartbeat @ ${g.devices}`,
            unit: "µs",
            samples: [g.span.perHeartbeat],
            baseline: { name: "raw ws", samples: [r.span.perHeartbeat] },
            note: i === 0
              ? `one window of ${p.windowMs / 1000} s, not judged (${spanNote(g)}; raw ws ${spanNote(r)})`
              : `over whole old-generation GC cycles (${spanNote(g)}; raw ws ${spanNote(r)})`
          })
        )
      }
      const last = run.levels[top]!
      figures.push(
        overCycles(figure({
          suite: "scale",
          name: `${label}: CPU @ ${last.devices} devices, ${p.heartbeatSeconds} s heartbeats (measured)`,
          unit: "% core",
          samples: [last.span.share * 100],
          baseline: { name: "raw ws", samples: [raw.levels[top]!.span.share * 100] },
          ...(label === "dev Core" ? { target: { on: "value", op: "<=", value: 5 } } : {}),
          note: `the process's CPU share minus its idle CPU, measured at this cadence (not projected), from the end of a ` +
            `major GC to the end of the first one after ${p.windows} × ${p.windowMs / 1000} s, so over whole old-generation ` +
            `cycles (${spanNote(last)}; raw ws ${spanNote(raw.levels[top]!)}); per window ` +
            `${last.cpuShare.map((x) => (x * 100).toFixed(2)).join(" / ")} %`
        }), [last]),
        figure({
          suite: "scale",
          name: `${label}: event-loop delay p99 @ ${last.devices} devices`,
          unit: "ms",
          samples: last.loopP99,
          baseline: { name: "raw ws", samples: raw.levels[top]!.loopP99 },
          ...(label === "dev Core" ? { target: { on: "value", op: "<=", value: 2, over: "every" } } : {})
        }),
        figure({
          suite: "scale",
          name: `${label}: event-loop delay max @ ${last.devices} devices`,
          unit: "ms",
          samples: last.loopMax,
          baseline: { name: "raw ws", samples: raw.levels[top]!.loopMax },
          ...(label === "dev Core" ? { target: { on: "value", op: "<=", value: 20, over: "every" } } : {})
        }),
        figure({
          suite: "scale",
          name: `${label}: marginal memory per device, last step vs middle step`,
          unit: "×",
          samples: marginalRatios(run),
          target: { on: "value", op: "<=", value: 1.25 },
          note: `RSS growth (after a memory-reducing GC) per added device from ${levels[top - 1]} to ${levels[top]} devices over the growth per device from ` +
            `${levels[0]} to ${levels[top - 1]}; flat = within 25 %`
        }),
        overCycles(figure({
          suite: "scale",
          name: `${label}: CPU per heartbeat, last level vs middle level`,
          unit: "×",
          samples: [lastVsMiddle([run.levels[mid]!.span.perHeartbeat, last.span.perHeartbeat])],
          target: { on: "value", op: "<=", value: 1.25 },
          note: `per-heartbeat CPU at ${levels[top]} over the one at ${levels[mid]}, each over whole old-generation GC cycles ` +
            `(${spanNote(run.levels[mid]!)} → ${spanNote(last)}); flat = within 25 %`
        }), [run.levels[mid]!, last])
      )
    }
    const pagesMeasured = devcore !== undefined && devcore.levels.every((l) => l.page.length > 0)
    const page = pagesMeasured ? devicePageFigures(devcore.levels, p) : { figures: [], notes: [] }
    figures.push(...page.figures)
    const notes = [
      `scale: levels ${levels.join(" / ")} devices from one load process (raw ws clients: bootstrap + dial + heartbeat as a daemon ` +
        `does; heartbeat = one kind with all 30 capabilities, its ts changing every second); dev Core = DevCore.layer with its ` +
        `SQLite store (every device registered) and declaration persistence; gateway = GatewayServer + ` +
        `DeviceCredentials.layerMemory; memory after a full GC (--expose-gc); CPU = all of the measured process's CPU time ` +
        `in ${p.windows} windows of ${p.windowMs} ms at a ${p.heartbeatSeconds} s heartbeat cadence, after the process's ` +
        `idle CPU (measured with no connection) is taken out; judged at the levels after the first over the whole span from ` +
        `the end of a major GC to the end of the first one after the windows (each waited for at most ${p.gcWaitMs / 1000} s); ` +
        `per level the memory readings come first (after connecting and a ${p.settleMs / 1000} s settle), then ` +
        `${p.recoverMs / 1000} s for their forced GCs' transient, then the CPU span`,
      ...([["dev Core", devcore], ["gateway", gateway], ["raw ws", raw]] as const).filter(([, run]) => run !== undefined).map(([label, run]) => {
        const r = run!
        return `scale: ${label as string}: JS heap per device ` +
          r.levels.map((l) => `${l.devices}: ${(median(l.heapPerDevice) / 1024).toFixed(1)} KiB`).join(", ") +
          `; connections opened per second ${r.levels.map((l) => Math.round(l.connectRate)).join(" / ")}` +
          `; CPU share ${r.levels.map((l) => `${l.devices}: ${(l.span.share * 100).toFixed(2)} % (${spanNote(l)})`).join(", ")}`
      }),
      ...page.notes
    ]
    return { figures, notes }
  }
}
