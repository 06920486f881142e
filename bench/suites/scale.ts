/**
 * Gateway scale suite (issue item 4): memory per idle device connection and heartbeat CPU at growing numbers
 * of concurrent connections from one load process. Three processes: the bench orchestrates, `gateway-host`
 * is the measured process (Core's real gateway with an in-memory credential store holding every device, or the
 * raw `ws` baseline server), `load` holds the connections (bootstrap + dial + heartbeats, as a daemon does).
 *
 * Per level: memory after a full GC (RSS and per-device growth over the same process before any connection),
 * then CPU over consecutive windows divided by the heartbeats sent in them. The gateway returns a 5 s
 * heartbeat cadence from bootstrap (more heartbeats per window; the per-heartbeat cost does not depend on the
 * cadence) and the projection to the default 15 s cadence is reported.
 */
import { figure, type Figure } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import type { HostMeasurement } from "../children/gatewayHost.js"
import { type BenchDevice, makeDevices } from "../support/core.js"
import { type Child, op, spawnChild } from "../support/processes.js"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const MiB = 1024 * 1024

interface Level {
  readonly devices: number
  /** Connections opened per second while growing to this level (gateway: bootstrap + dial; raw: dial). */
  readonly connectRate: number
  /** RSS after GC, bytes, per memory sample. */
  readonly rss: Array<number>
  /** (RSS − RSS with no connection) / devices, bytes, per memory sample. */
  readonly perDevice: Array<number>
  /** The same for the JS heap in use (the rest of the growth is native: sockets, buffers, code). */
  readonly heapPerDevice: Array<number>
  /** Host CPU per heartbeat sent, microseconds, per window, after the idle process's own CPU is taken out. */
  readonly cpuPerHeartbeat: Array<number>
  /** Host CPU share of one core, per window. */
  readonly cpuShare: Array<number>
}

const measure = async (host: Child, collect: boolean): Promise<HostMeasurement> => {
  host.send({ op: "measure", collect })
  return host.next((m): m is HostMeasurement => op("measured")(m))
}
const heartbeatsSent = async (load: Child): Promise<number> => {
  load.send({ op: "count" })
  const reply = await load.next(op("count"))
  return reply["heartbeats"] as number
}

const runMode = async (
  ctx: SuiteContext,
  mode: "gateway" | "raw",
  devices: ReadonlyArray<BenchDevice>,
  levels: ReadonlyArray<number>,
  p: { readonly heartbeatSeconds: number; readonly windows: number; readonly windowMs: number; readonly settleMs: number }
): Promise<Array<Level>> => {
  const host = spawnChild(ctx.self, "gateway-host", { execArgv: ["--expose-gc"] })
  const load = spawnChild(ctx.self, "load")
  try {
    host.send({ op: "start", mode, devices: mode === "gateway" ? devices : [], heartbeatSeconds: p.heartbeatSeconds })
    const started = await host.next(op("started"), 120_000)
    const baseUrl = started["baseUrl"] as string
    await sleep(p.settleMs)
    const empty = await measure(host, true)
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
      load.send({ op: "connect", mode, baseUrl, devices: devices.slice(connected, n), heartbeatSeconds: p.heartbeatSeconds })
      const reply = await load.next(op("connected"), 600_000)
      if ((reply["failed"] as number) > 0) {
        throw new Error(`scale: ${reply["failed"]} of ${n - connected} connections failed (${reply["firstFailure"]}); logs: ${host.logFile}, ${load.logFile}`)
      }
      const elapsed = performance.now() - t0
      ctx.log(`scale: ${mode}: ${n} connected in ${Math.round(elapsed)} ms; measuring`)
      const connectRate = ((n - connected) * 1000) / elapsed
      connected = n
      await sleep(p.settleMs)
      const level: Level = { devices: n, connectRate, rss: [], perDevice: [], heapPerDevice: [], cpuPerHeartbeat: [], cpuShare: [] }
      const memory = async () => {
        const m = await measure(host, true)
        level.rss.push(m.rss)
        level.perDevice.push((m.rss - empty.rss) / n)
        level.heapPerDevice.push((m.heapUsed - empty.heapUsed) / n)
      }
      await memory()
      let cpu = (await measure(host, false)).cpuMicros
      let sent = await heartbeatsSent(load)
      let at = performance.now()
      for (let w = 0; w < p.windows; w++) {
        await sleep(p.windowMs)
        const cpuNow = (await measure(host, false)).cpuMicros
        const sentNow = await heartbeatsSent(load)
        const now = performance.now()
        const busy = Math.max(0, cpuNow - cpu - idleMicrosPerMs * (now - at))
        level.cpuPerHeartbeat.push(busy / Math.max(1, sentNow - sent))
        level.cpuShare.push((cpuNow - cpu) / 1000 / (now - at))
        cpu = cpuNow
        sent = sentNow
        at = now
      }
      await memory()
      out.push(level)
    }
    return out
  } finally {
    await load.stop()
    await host.stop()
  }
}

/** Per memory sample: (RSS growth per device over the last step) / (RSS growth per device over the first step). */
const marginalRatios = (levels: ReadonlyArray<Level>): Array<number> => {
  const first = levels[0]!
  const last = levels[levels.length - 1]!
  const before = levels[levels.length - 2]!
  return last.rss.map((rss, i) => {
    const lastStep = (rss - before.rss[i]!) / (last.devices - before.devices)
    const firstStep = first.perDevice[i]!
    return lastStep / firstStep
  })
}

export const scaleSuite: Suite = {
  name: "scale",
  describe: "gateway memory per idle device connection and heartbeat CPU at growing connection counts",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const levels = ctx.quick ? [200, 500, 1000] : [1000, 5000, 10_000]
    const p = ctx.quick
      ? { heartbeatSeconds: 5, windows: 2, windowMs: 2500, settleMs: 1000 }
      : { heartbeatSeconds: 5, windows: 3, windowMs: 3000, settleMs: 3000 }
    const devices = makeDevices("scale", levels[levels.length - 1]!)
    const raw = await runMode(ctx, "raw", devices, levels, p)
    const gateway = await runMode(ctx, "gateway", devices, levels, p)
    const figures: Array<Figure> = []
    const kib = (xs: ReadonlyArray<number>) => xs.map((x) => x / 1024)
    for (let i = 0; i < levels.length; i++) {
      const g = gateway[i]!
      const r = raw[i]!
      figures.push(
        figure({
          suite: "scale",
          name: `memory per idle device @ ${g.devices}`,
          unit: "KiB",
          samples: kib(g.perDevice),
          baseline: { name: "raw ws", samples: kib(r.perDevice) }
        }),
        figure({
          suite: "scale",
          name: `CPU per heartbeat @ ${g.devices}`,
          unit: "µs",
          samples: g.cpuPerHeartbeat,
          baseline: { name: "raw ws", samples: r.cpuPerHeartbeat }
        })
      )
    }
    const top = gateway[gateway.length - 1]!
    const topRaw = raw[raw.length - 1]!
    const first = gateway[0]!
    const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!
    figures.push(
      figure({
        suite: "scale",
        name: `gateway RSS @ ${top.devices} idle devices`,
        unit: "MiB",
        samples: top.rss.map((x) => x / MiB),
        baseline: { name: "raw ws", samples: topRaw.rss.map((x) => x / MiB) },
        ...(ctx.quick ? {} : { target: { on: "value", op: "<", value: 1024 } })
      }),
      figure({
        suite: "scale",
        name: `marginal memory per device, last step vs first`,
        unit: "×",
        samples: marginalRatios(gateway),
        target: { on: "value", op: "<=", value: 1.25 },
        note: `RSS growth per added device from ${gateway[gateway.length - 2]?.devices ?? 0} to ${top.devices} devices, over the ` +
          `growth per device from 0 to ${first.devices}; flat = within 25 %`
      }),
      figure({
        suite: "scale",
        name: `CPU per heartbeat ${top.devices} vs ${first.devices}`,
        unit: "×",
        samples: top.cpuPerHeartbeat.map((x) => x / median(first.cpuPerHeartbeat)),
        target: { on: "value", op: "<=", value: 1.25 },
        note: "flat = per-heartbeat CPU at the largest level within 25 % of the smallest"
      }),
      figure({
        suite: "scale",
        name: `gateway CPU @ ${top.devices} devices, 15 s heartbeats`,
        unit: "% core",
        samples: top.cpuPerHeartbeat.map((us) => ((us * top.devices) / 15 / 1e6) * 100),
        baseline: { name: "raw ws", samples: topRaw.cpuPerHeartbeat.map((us) => ((us * topRaw.devices) / 15 / 1e6) * 100) },
        note: "projected from the measured CPU per heartbeat"
      })
    )
    const notes = [
      `scale: levels ${levels.join(" / ")} devices from one load process (raw ws clients: bootstrap + dial + heartbeat as a daemon ` +
        `does; heartbeat = one kind with all 30 capabilities); gateway = GatewayServer + DeviceCredentials.layerMemory holding ` +
        `${devices.length} devices; memory after a full GC (--expose-gc); CPU = all of the measured process's CPU time in ` +
        `${p.windows} windows of ${p.windowMs} ms at a ${p.heartbeatSeconds} s heartbeat cadence, divided by the heartbeats sent, after the process's ` +
        `idle CPU (measured with no connection) is taken out`,
      `scale: JS heap per device (of the RSS per device): gateway ` +
        gateway.map((l) => `${l.devices}: ${(median(l.heapPerDevice) / 1024).toFixed(1)} KiB`).join(", ") +
        `; raw ws ` + raw.map((l) => `${l.devices}: ${(median(l.heapPerDevice) / 1024).toFixed(1)} KiB`).join(", "),
      `scale: connections opened per second from the one load process (gateway: bootstrap + upgrade + first heartbeat; ` +
        `raw: upgrade): gateway ${gateway.map((l) => Math.round(l.connectRate)).join(" / ")}, raw ${raw.map((l) => Math.round(l.connectRate)).join(" / ")}`,
      `scale: measured CPU share of the gateway process at a ${p.heartbeatSeconds} s cadence: ` +
        gateway.map((l) => `${l.devices}: ${(median(l.cpuShare) * 100).toFixed(1)} % core`).join(", ")
    ]
    return { figures, notes }
  }
}
