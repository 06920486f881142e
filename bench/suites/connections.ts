/**
 * Connections suite (issue 18, "≤ 16 KiB RSS per connection"): the memory one more idle device connection
 * costs, measured as the step from N to 2N connections (the step from 0 carries code compilation and heap
 * growth). Three hosts in turn, each in a fresh `gateway-host` child started with `--expose-gc` (memory is read
 * after a full collection): the whole dev Core, the bare gateway, and the raw `ws` server (the baseline); the
 * `load` child holds the connections (bootstrap, dial, heartbeat every 15 s, as a daemon does).
 *
 * RSS is judged after a memory-reducing GC, which gives back V8's young generation: a burst of connections grows
 * it (doubling, up to 2 × 64 MiB on the bench machine) and a full GC keeps it, so with it the step from N to 2N
 * read anything from 14 to 64 KiB per connection for the same code, depending on whether V8 doubled it inside
 * the step (gatewayHost.ts).
 *
 * `BENCH_HEAP_SNAPSHOT_DIR=<dir>` also writes a heap snapshot of each host at 0, N and 2N connections (a diff of
 * N and 2N shows what one connection holds: docs/performance.md).
 */
import type { HostMeasurement, HostMode } from "../children/gatewayHost.js"
import { figure, type Figure, formatNumber } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { type BenchDevice, makeDevices } from "../support/core.js"
import { type Child, op, spawnChild } from "../support/processes.js"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface Step {
  /**
   * RSS and JS heap added per connection from N to 2N, bytes, one sample per measurement (RSS after a full GC is
   * only reported in a note: each reading's memory-reducing GC shrinks the young generation the next one regrows).
   */
  readonly rss: Array<number>
  /** RSS after a memory-reducing GC added per connection from N to 2N, bytes. */
  readonly rssAfterReducing: Array<number>
  readonly heap: Array<number>
  /** The same from 0 to N (one-time costs included), for the note. */
  readonly firstRss: number
}

const measure = async (host: Child): Promise<HostMeasurement> => {
  host.send({ op: "measure", collect: true })
  return host.next((m): m is HostMeasurement => op("measured")(m))
}

const snapshot = async (host: Child, mode: HostMode, n: number) => {
  const dir = process.env["BENCH_HEAP_SNAPSHOT_DIR"]
  if (dir === undefined || dir === "") return
  host.send({ op: "snapshot", path: `${dir}/${mode}-${n}.heapsnapshot` })
  await host.next(op("snapshot-written"), 600_000)
}

const runHost = async (ctx: SuiteContext, mode: HostMode, devices: ReadonlyArray<BenchDevice>, n: number, samples: number): Promise<Step> => {
  const host = spawnChild(ctx.self, "gateway-host", { execArgv: ["--expose-gc"] })
  const load = spawnChild(ctx.self, "load")
  try {
    host.send({ op: "start", mode, devices: mode === "raw" ? [] : devices, heartbeatSeconds: 15 })
    const baseUrl = (await host.next(op("started"), 120_000))["baseUrl"] as string
    await sleep(1500)
    const zero = await measure(host)
    await snapshot(host, mode, 0)
    const at: Array<HostMeasurement> = []
    for (const [from, to] of [[0, n], [n, 2 * n]] as const) {
      ctx.log(`connections: ${mode}: connecting devices ${from}–${to}`)
      load.send({ op: "connect", mode: mode === "raw" ? "raw" : "gateway", baseUrl, devices: devices.slice(from, to), heartbeatSeconds: 15 })
      const reply = await load.next(op("connected"), 600_000)
      if ((reply["failed"] as number) > 0) {
        throw new Error(`connections: ${reply["failed"]} connections failed (${reply["firstFailure"]}); logs: ${host.logFile}, ${load.logFile}`)
      }
      await sleep(3000)
      at.push(await measure(host))
      await snapshot(host, mode, to)
    }
    const step: Step = { rss: [], rssAfterReducing: [], heap: [], firstRss: (at[0]!.rss - zero.rss) / n }
    const reduced = (m: HostMeasurement) => m.rssReduced
    // Several readings at 2N, a second apart (RSS moves with the allocator), each against the reading at N.
    for (let k = 0; k < samples; k++) {
      if (k > 0) await sleep(1000)
      const m = k === 0 ? at[1]! : await measure(host)
      step.rss.push((m.rss - at[0]!.rss) / n)
      step.rssAfterReducing.push((reduced(m) - reduced(at[0]!)) / n)
      step.heap.push((m.heapUsed - at[0]!.heapUsed) / n)
    }
    return step
  } finally {
    await load.stop()
    await host.stop()
  }
}

export const connectionsSuite: Suite = {
  name: "connections",
  describe: "memory of one more idle device connection (N → 2N): dev Core, bare gateway, raw ws",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const n = ctx.quick ? 300 : 1000
    const samples = ctx.quick ? 2 : 5
    const devices = makeDevices("conn", 2 * n)
    const raw = await runHost(ctx, "raw", devices, n, samples)
    const gateway = await runHost(ctx, "gateway", devices, n, samples)
    const devcore = await runHost(ctx, "devcore", devices, n, samples)
    const kib = (xs: ReadonlyArray<number>) => xs.map((x) => x / 1024)
    const figures: Array<Figure> = [
      figure({
        suite: "connections",
        name: `dev Core: RSS per idle connection after a memory-reducing GC, ${n} → ${2 * n}`,
        unit: "KiB",
        samples: kib(devcore.rssAfterReducing),
        baseline: { name: "raw ws", samples: kib(raw.rssAfterReducing) },
        target: { on: "value", op: "<=", value: 16 },
        note: `0 → ${n} after a full GC only (one-time costs and V8's young generation included): ` +
          `${formatNumber(devcore.firstRss / 1024)} KiB; N → 2N after a full GC only: ${formatNumber(devcore.rss[0]! / 1024)} KiB`
      }),
      figure({
        suite: "connections",
        name: `dev Core: JS heap per idle connection, ${n} → ${2 * n}`,
        unit: "KiB",
        samples: kib(devcore.heap),
        baseline: { name: "raw ws", samples: kib(raw.heap) }
      }),
      figure({
        suite: "connections",
        name: `gateway: RSS per idle connection after a memory-reducing GC, ${n} → ${2 * n}`,
        unit: "KiB",
        samples: kib(gateway.rssAfterReducing),
        baseline: { name: "raw ws", samples: kib(raw.rssAfterReducing) },
        note: `0 → ${n} after a full GC only: ${formatNumber(gateway.firstRss / 1024)} KiB; N → 2N after a full GC only: ` +
          `${formatNumber(gateway.rss[0]! / 1024)} KiB`
      }),
      figure({
        suite: "connections",
        name: `gateway: JS heap per idle connection, ${n} → ${2 * n}`,
        unit: "KiB",
        samples: kib(gateway.heap),
        baseline: { name: "raw ws", samples: kib(raw.heap) }
      })
    ]
    const notes = [
      `connections: ${n} then ${2 * n} idle devices (bootstrap, dial, heartbeat every 15 s) from one load process; memory after a ` +
        `full GC, then a memory-reducing one, 3 s after each level, ${samples} readings at ${2 * n}; raw ws 0 → ${n}: ${formatNumber(raw.firstRss / 1024)} KiB`
    ]
    return { figures, notes }
  }
}
