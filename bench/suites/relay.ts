/**
 * Relay and latency suite (issue items 2 and 3), on loopback: the bench process is Core (the real gateway:
 * `GatewayServer`, a `DeviceSession`, `subscribeDurable`), a `runtime-peer` child is the Runtime (the real daemon:
 * Connector, WebSocket Transport, Connection, the scripted harness). The baseline of each figure is raw `ws`,
 * measured in alternating rounds.
 *
 * - relay: deltas per second from the scripted harness to Core's Run subscriber (first to last delta of a Turn
 *   of N deltas), against N prebuilt frames of the same shape sent over raw `ws` with the daemon's batching
 *   (corked batches of up to 64, the next after the last write callback); the negative control is raw `ws`
 *   with one write per frame. Each raw contender has a sender (a `runtime-peer` child, raw only) and a receiver
 *   (a `raw-receiver` child) of its own: before 2026-12-03 the raw senders shared the daemon's process and the
 *   raw receiver the gateway's, so one contender's garbage was collected in another's rounds. CPU per frame is
 *   each process's CPU time over its round; each process's CPU between its rounds is reported beside (a note).
 * - per-frame latency: the `stamped` harness writes the CLOCK_MONOTONIC time of each emission into its delta
 *   and sends the same stamp over raw `ws` at the same moment (and again 1 ms later: the negative control);
 *   Core takes the difference frame by frame. Frames are paced (one per `intervalMs`), so this is latency
 *   without queueing. The p99 target (< 1 ms) is judged on the p99 of per-frame differences in every round.
 * - Turn start: prepare → ready → start → first delta of a one-delta script (zero harness latency), Core's
 *   clock; the baseline is two raw round trips (the two request / reply exchanges a Turn start needs).
 */

import { readdirSync, readFileSync } from "node:fs"
import { figure, type Figure, formatNumber } from "../lib/figures.js"
import { distribution, percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices, runTurn, sessionOf, startCore, watchDeclared } from "../support/core.js"
import { type Child, op, spawnChild, withTimeout } from "../support/processes.js"
import { startRawServer } from "../support/rawServer.js"

/** The delta text of the relay (a typical streamed fragment). */
const DeltaText = "The parser accepts trailing commas only in "


const script = (steps: ReadonlyArray<unknown>) => JSON.stringify({ script: steps })

/** CPU clock ticks of each thread of this process, by `name#tid` (Linux `/proc`; empty elsewhere). */
const threadTicks = (): Map<string, number> => {
  const ticks = new Map<string, number>()
  let tids: Array<string> = []
  try {
    tids = readdirSync("/proc/self/task")
  } catch {
    return ticks
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
      const close = stat.lastIndexOf(")")
      const fields = stat.slice(close + 2).split(" ")
      ticks.set(`${stat.slice(stat.indexOf("(") + 1, close)}#${tid}`, Number(fields[11]) + Number(fields[12]))
    } catch {
      // The thread ended.
    }
  }
  return ticks
}

export const relaySuite: Suite = {
  name: "relay",
  describe: "daemon relay throughput, per-frame latency and Turn start against raw ws (two processes, loopback)",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const p = ctx.quick
      ? { relayRounds: 2, relayWarmRounds: 0, relayFrames: 1000, latencyRounds: 1, latencyFrames: 100, intervalMs: 1, turns: 5 }
      : { relayRounds: 7, relayWarmRounds: 3, relayFrames: 10_000, latencyRounds: 3, latencyFrames: 2000, intervalMs: 1, turns: 40 }
    const [device] = makeDevices("relay", 1)
    // The gateway as configured by default (Run subscriber buffer 1024, yielding to a backlogged subscriber).
    const core = await startCore([device!], {})
    const raw = await startRawServer()
    const child = spawnChild(ctx.self, "runtime-peer")
    // The relay's raw contenders, each with a sender and a receiver process of its own (no heap shared with the
    // daemon, the gateway or the other raw contender).
    const rawPairs = {
      batched: { receiver: spawnChild(ctx.self, "raw-receiver"), sender: spawnChild(ctx.self, "runtime-peer") },
      each: { receiver: spawnChild(ctx.self, "raw-receiver"), sender: spawnChild(ctx.self, "runtime-peer") }
    }
    const figures: Array<Figure> = []
    const notes: Array<string> = []
    try {
      child.send({ op: "raw", url: raw.url })
      await Promise.all([raw.connected, child.next(op("raw-ready"))])
      for (const { receiver, sender } of Object.values(rawPairs)) {
        sender.send({ op: "raw", url: (await receiver.next(op("listening")))["url"] })
        await Promise.all([receiver.next(op("connected")), sender.next(op("raw-ready"))])
      }
      const watch = watchDeclared(core, device!.deviceId)
      await watch.ready
      child.send({ op: "daemon", coreUrl: core.baseUrl, deviceId: device!.deviceId, credential: device!.credential })
      await withTimeout(watch.declared, 30_000, `the daemon's first heartbeat (log: ${child.logFile})`)
      const session = await sessionOf(core, device!.deviceId)
      // One Session per kind: a Session's retained Executor keeps its configuration (another one conflicts).
      const sessions: Record<string, string> = {
        scripted: "0d4c2a1e-8f3b-4c6d-9e2a-7b5f1c3d9e80",
        stamped: "6a1f3c5e-2b4d-4e6f-8a0c-1e3d5f7a9b2c"
      }
      const turn = (agentKind: string, text: string, onDelta?: Parameters<typeof runTurn>[1]["onDelta"]) =>
        core.runtime.runPromise(
          runTurn(session, { agentKind, sessionId: sessions[agentKind]!, text, ...(onDelta === undefined ? {} : { onDelta }) })
        )

      // ------------------------------------------------------------------ relay throughput
      // Baseline: raw ws with the daemon's batching (corked batches of up to 64, the next after the last write
      // callback); negative control: raw ws with one write per frame, which must miss the ratio target.
      // One step repeated (docs/performance.md "relayinput"): the raw sender gets no input, so neither does the daemon's
      // harness beyond one step; BENCH_RELAY_SCRIPT=steps sends the earlier form, one step per delta (≈ 600 KB).
      const deltaSteps = (n: number) =>
        process.env["BENCH_RELAY_SCRIPT"] === "steps" ? Array.from({ length: n }, () => ({ delta: DeltaText })) : [{ delta: DeltaText, repeat: n }]
      const relayScript = script(deltaSteps(p.relayFrames))
      const cpuOf = (c: Child) => async () => {
        c.send({ op: "cpu" })
        return ((await c.next(op("cpu")))["micros"] as number)
      }
      const selfCpu = async () => {
        const c = process.cpuUsage()
        return c.user + c.system
      }
      /** The CPU clocks of a contender's two sides: Core's (receiving) and the Runtime's (sending). */
      type Sides = { readonly core: () => Promise<number>; readonly peer: () => Promise<number> }
      const daemonSides: Sides = { core: selfCpu, peer: cpuOf(child) }
      const batchedSides: Sides = { core: cpuOf(rawPairs.batched.receiver), peer: cpuOf(rawPairs.batched.sender) }
      const eachSides: Sides = { core: cpuOf(rawPairs.each.receiver), peer: cpuOf(rawPairs.each.sender) }
      /** Runs `f`, returning its rate and both sides' CPU microseconds per frame (each in its own process). */
      const measured = async (
        f: () => Promise<{ readonly first: number; readonly last: number; readonly n: number }>,
        sides: Sides = daemonSides
      ) => {
        const peer0 = await sides.peer()
        const core0 = await sides.core()
        const r = await f()
        const core1 = await sides.core()
        const peer1 = await sides.peer()
        return {
          rate: ((r.n - 1) * 1000) / (r.last - r.first),
          coreCpu: (core1 - core0) / r.n,
          peerCpu: (peer1 - peer0) / r.n
        }
      }
      /** A burst from the raw sender to the raw receiver (`batch`: the daemon's batching; none: one write per frame). */
      const rawBurst = async (n: number, runId: string, batch?: number) => {
        const receiver = batch === undefined ? rawPairs.each.receiver : rawPairs.batched.receiver
        receiver.send({ op: "burst", n, runId, text: DeltaText, ...(batch === undefined ? {} : { batch }) })
        const b = await receiver.next(op("burst"))
        return { first: b["first"] as number, last: b["last"] as number, n }
      }
      const rawBatched = () => rawBurst(p.relayFrames, "run-raw-batched", 64)
      const rawEach = () => rawBurst(p.relayFrames, "run-raw-each")
      const daemon = async () => {
        const t = await turn("scripted", relayScript)
        if (t.deltas !== p.relayFrames) throw new Error(`relay: ${t.deltas} deltas reached Core, expected ${p.relayFrames}`)
        return { first: t.firstDelta, last: t.lastDelta, n: t.deltas }
      }
      ctx.log(`relay: warm-up`)
      await turn("scripted", script(deltaSteps(Math.min(2000, p.relayFrames))))
      await rawBurst(Math.min(2000, p.relayFrames), "run-raw-warm")
      await rawBurst(Math.min(2000, p.relayFrames), "run-raw-warm-b", 64)
      const daemonOnly = Number(process.env["BENCH_RELAY_DAEMON_ONLY"] ?? 0)
      if (daemonOnly > 0) {
        // Diagnostic (README "Diagnostic switches"): only the daemon's Turns, for profiling either side; no figures.
        const perTurn: Array<{ readonly core: number; readonly main: number; readonly peer: number }> = []
        const threads0 = threadTicks()
        for (let i = 0; i < daemonOnly; i++) {
          const main0 = process.threadCpuUsage()
          const r = await measured(daemon)
          const main1 = process.threadCpuUsage(main0)
          perTurn.push({ core: r.coreCpu, main: (main1.user + main1.system) / p.relayFrames, peer: r.peerCpu })
        }
        const threads1 = threadTicks()
        const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!.toFixed(2)
        ctx.log(
          `relay, daemon only: ${daemonOnly} Turns of ${p.relayFrames} deltas; µs per delta (median of Turns): Core process ` +
            `${median(perTurn.map((t) => t.core))}, Core main thread ${median(perTurn.map((t) => t.main))}, daemon ` +
            `${median(perTurn.map((t) => t.peer))}; per Turn (Core process / main / daemon): ` +
            perTurn.map((t) => `${t.core.toFixed(2)}/${t.main.toFixed(2)}/${t.peer.toFixed(2)}`).join(" ")
        )
        const byName = new Map<string, number>()
        for (const [key, ticks] of threads1) {
          const name = key.slice(0, key.lastIndexOf("#"))
          byName.set(name, (byName.get(name) ?? 0) + ticks - (threads0.get(key) ?? 0))
        }
        // /proc ticks are 10 ms (USER_HZ 100): meaningful over many Turns only.
        const frames = daemonOnly * p.relayFrames
        ctx.log(`relay, daemon only: Core CPU µs per delta by thread name: ${[...byName].map(([name, ticks]) => `${name} ${((ticks * 10_000) / frames).toFixed(3)}`).join(", ")}`)
        return { figures: [], notes: [] }
      }
      type Round = { readonly rate: number; readonly coreCpu: number; readonly peerCpu: number }
      const rounds: Record<"daemon" | "batched" | "each", Array<Round>> = { daemon: [], batched: [], each: [] }
      const order = ["batched", "daemon", "each"] as const
      // Each process's CPU over the whole relay section, to show what it spent between its rounds (deferred work,
      // such as garbage collected at idle, that no round's figure carries).
      // Unmeasured full rounds first: each contender's processes warm up on their own work only (JIT tiers, heap
      // sizes), as the daemon's process once did on the raw senders' work too; the rounds then measure steady state.
      for (let r = 0; r < p.relayWarmRounds; r++) {
        ctx.log(`relay: warm-up round ${r + 1}/${p.relayWarmRounds}`)
        for (const who of order) await (who === "daemon" ? daemon() : who === "batched" ? rawBatched() : rawEach())
      }
      const spans = {
        core: daemonSides.core,
        daemon: daemonSides.peer,
        "batched receiver": batchedSides.core,
        "batched sender": batchedSides.peer,
        "control receiver": eachSides.core,
        "control sender": eachSides.peer
      }
      const spanKeys = Object.keys(spans) as Array<keyof typeof spans>
      const spanStart: Record<string, number> = {}
      for (const k of spanKeys) spanStart[k] = await spans[k]()
      for (let r = 0; r < p.relayRounds; r++) {
        ctx.log(`relay: round ${r + 1}/${p.relayRounds} (${p.relayFrames} frames per contender)`)
        // Rotating order, so no contender always runs first or last in a round.
        for (let k = 0; k < order.length; k++) {
          const who = order[(r + k) % order.length]!
          rounds[who].push(
            who === "daemon"
              ? await measured(daemon)
              : who === "batched"
              ? await measured(rawBatched, batchedSides)
              : await measured(rawEach, eachSides)
          )
        }
      }
      const spanCpu: Record<string, number> = {}
      for (const k of spanKeys) spanCpu[k] = (await spans[k]()) - spanStart[k]!
      const pick = (xs: ReadonlyArray<{ rate: number; coreCpu: number; peerCpu: number }>, k: "rate" | "coreCpu" | "peerCpu") =>
        xs.map((x) => x[k])
      figures.push(
        figure({
          suite: "relay",
          name: "deltas harness → daemon → Core subscriber",
          unit: "frames/s",
          samples: pick(rounds.daemon, "rate"),
          baseline: { name: "raw ws, same batching", samples: pick(rounds.batched, "rate") },
          target: { on: "ratio", op: ">=", value: 0.5 },
          control: { name: "raw ws, one write per frame", samples: pick(rounds.each, "rate") },
          note: "ratio per round against raw ws with the daemon's batching (corked batches of up to 64 frames)"
        }),
        figure({
          suite: "relay",
          name: "CPU per frame, Runtime side (daemon process)",
          unit: "µs",
          samples: pick(rounds.daemon, "peerCpu"),
          baseline: { name: "raw ws sender, same batching", samples: pick(rounds.batched, "peerCpu") },
          target: { on: "value", op: "<=", value: 2 },
          note: "the daemon child's whole CPU time over the round / frames (the scripted harness producing the deltas " +
            "from one repeated step included); the baseline: the raw sender's own process"
        }),
        figure({
          suite: "relay",
          name: "CPU per frame, Core side (gateway → subscriber)",
          unit: "µs",
          samples: pick(rounds.daemon, "coreCpu"),
          baseline: { name: "raw ws receiver", samples: pick(rounds.batched, "coreCpu") },
          target: { on: "value", op: "<=", value: 2 },
          note: "the bench process's CPU time over the round / frames (Turn setup included: prepare, start, done); the " +
            "baseline: the raw receiver's own process"
        })
      )
      notes.push(
        `relay: raw ws with one write per frame (the control): ${pick(rounds.each, "rate").map((x) => formatNumber(x)).join(" / ")} ` +
          `frames/s; CPU per frame ${pick(rounds.each, "peerCpu").map((x) => x.toFixed(2)).join(" / ")} µs sender, ` +
          `${pick(rounds.each, "coreCpu").map((x) => x.toFixed(2)).join(" / ")} µs receiver`
      )
      {
        const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)
        const inRounds: Record<keyof typeof spans, number> = {
          core: sum(pick(rounds.daemon, "coreCpu")),
          daemon: sum(pick(rounds.daemon, "peerCpu")),
          "batched receiver": sum(pick(rounds.batched, "coreCpu")),
          "batched sender": sum(pick(rounds.batched, "peerCpu")),
          "control receiver": sum(pick(rounds.each, "coreCpu")),
          "control sender": sum(pick(rounds.each, "peerCpu"))
        }
        notes.push(
          `relay: CPU outside its own rounds over the ${p.relayRounds} rounds, µs per frame of its rounds (work the round ` +
            `figures do not carry): ` +
            spanKeys.map((k) =>
              `${k} ${((spanCpu[k]! / p.relayFrames - inRounds[k]) / p.relayRounds).toFixed(2)}`
            ).join(", ") +
            ` (core = the bench process, which also drives the rounds)`
        )
      }

      // ------------------------------------------------------------------ per-frame latency (paired)
      // Each stamped delta is also sent over raw ws with the same stamp at the same moment, and again 1 ms later
      // (the control); Core takes the difference frame by frame.
      const latencyScript = script(
        Array.from({ length: p.latencyFrames }, () => [{ delta: "x" }, { sleep: p.intervalMs }]).flat()
      )
      const added50: Array<number> = []
      const added99: Array<number> = []
      const control99: Array<number> = []
      const daemon50: Array<number> = []
      const daemon99: Array<number> = []
      const raw50: Array<number> = []
      const raw99: Array<number> = []
      const pairedCounts: Array<number> = []
      child.send({ op: "pair", on: true })
      await child.next(op("paired"))
      for (let r = 0; r < p.latencyRounds; r++) {
        ctx.log(`latency: round ${r + 1}/${p.latencyRounds} (${p.latencyFrames} paced frames, each also over raw ws)`)
        const daemonLatencies = new Map<string, number>()
        const collector = raw.collectPaired()
        await turn("stamped", latencyScript, (delta) => {
          daemonLatencies.set(delta.payload.delta, Number(process.hrtime.bigint() - BigInt(delta.payload.delta)) / 1e6)
        })
        await new Promise((resolve) => setTimeout(resolve, 20)) // the last delayed control frames
        collector.stop()
        const rawLatencies = collector.byId.get("paired") ?? new Map<string, number>()
        const delayed = collector.byId.get("delayed") ?? new Map<string, number>()
        const diffs: Array<number> = []
        const controlDiffs: Array<number> = []
        for (const [stamp, d] of daemonLatencies) {
          const w = rawLatencies.get(stamp)
          if (w === undefined) continue
          diffs.push(d - w)
          const c = delayed.get(stamp)
          if (c !== undefined) controlDiffs.push(c - w)
        }
        if (diffs.length < p.latencyFrames * 0.99) {
          throw new Error(`latency: only ${diffs.length} of ${p.latencyFrames} frames were paired`)
        }
        pairedCounts.push(diffs.length)
        const d = distribution([...daemonLatencies.values()])
        const w = distribution([...rawLatencies.values()])
        const diff = distribution(diffs)
        daemon50.push(d.p50)
        daemon99.push(d.p99)
        raw50.push(w.p50)
        raw99.push(w.p99)
        added50.push(diff.p50)
        added99.push(diff.p99)
        control99.push(distribution(controlDiffs).p99)
      }
      child.send({ op: "pair", on: false })
      await child.next(op("paired"))
      figures.push(
        figure({
          suite: "latency",
          name: "per-frame latency p50 through daemon",
          unit: "ms",
          samples: daemon50,
          baseline: { name: "raw ws p50, same frames", samples: raw50 }
        }),
        figure({
          suite: "latency",
          name: "per-frame latency p99 through daemon",
          unit: "ms",
          samples: daemon99,
          baseline: { name: "raw ws p99, same frames", samples: raw99 }
        }),
        figure({
          suite: "latency",
          name: "added per-frame latency p50 (paired)",
          unit: "ms",
          samples: added50,
          note: "the median of per-frame differences (daemon − raw ws for the same stamped frame)"
        }),
        figure({
          suite: "latency",
          name: "added per-frame latency p99 (paired), worst round",
          unit: "ms",
          samples: added99,
          target: { on: "value", op: "<", value: 1, over: "every" },
          control: { name: "raw ws sent again 1 ms later", samples: control99 },
          note: "the p99 of per-frame differences (daemon − raw ws for the same stamped frame), judged on every round"
        })
      )
      const roundNotes: Array<string> = []
      for (let r = 0; r < daemon50.length; r++) {
        roundNotes.push(
          `latency round ${r + 1}: ${pairedCounts[r]} paired frames; through daemon p50 ${formatNumber(daemon50[r]!)} / p99 ` +
            `${formatNumber(daemon99[r]!)} ms; raw ws p50 ${formatNumber(raw50[r]!)} / p99 ${formatNumber(raw99[r]!)} ms; ` +
            `per-frame difference p50 ${formatNumber(added50[r]!)} / p99 ${formatNumber(added99[r]!)} ms; control p99 ` +
            `${formatNumber(control99[r]!)} ms`
        )
      }

      // ------------------------------------------------------------------ Turn start
      const startScript = script([{ delta: "x" }])
      const totals: Array<number> = []
      const prepares: Array<number> = []
      const starts: Array<number> = []
      const echoes: Array<number> = []
      ctx.log(`latency: ${p.turns} Turn starts`)
      await turn("scripted", startScript)
      for (let i = 0; i < p.turns; i++) {
        echoes.push(await raw.echo())
        const t = await turn("scripted", startScript)
        totals.push(t.firstDelta - t.prepareSent)
        prepares.push(t.ready - t.prepareSent)
        starts.push(t.firstDelta - t.startSent)
      }
      const twoTrips = echoes.map((e) => 2 * e)
      figures.push(
        figure({
          suite: "latency",
          name: "Turn start prepare → first delta",
          unit: "ms",
          samples: totals,
          baseline: { name: "2 raw round trips", samples: twoTrips },
          target: { on: "value", op: "<", value: 5 },
          note: `p99 ${percentile(totals, 99).toFixed(2)} ms over ${p.turns} Turns (min / median / max are over Turns)`
        }),
        figure({ suite: "latency", name: "Turn start: prepare → ready", unit: "ms", samples: prepares }),
        figure({ suite: "latency", name: "Turn start: start → first delta", unit: "ms", samples: starts })
      )
      notes.push(
        `relay: six processes, loopback: bench = Core gateway; daemon child; for each raw contender a sender child and ` +
          `a receiver child (no contender's heap shared with another's since 2026-12-03); the gateway's default Run ` +
          `subscriber buffer (1024); ${p.relayWarmRounds} unmeasured warm-up rounds, then ${p.relayRounds} interleaved ` +
          `rounds (rotating order) of ${p.relayFrames} deltas of ` +
          `${DeltaText.length} characters per contender: daemon, raw ws with the daemon's batching (baseline), raw ws with ` +
          `one write per frame (control); CPU = each process's CPU time over its round / frames (not pinned to CPUs)`,
        `latency: ${p.latencyRounds} rounds of ${p.latencyFrames} frames paced every ${p.intervalMs} ms; each frame also sent ` +
          `over raw ws with the same stamp at the same moment (paired) and 1 ms later (control); one-way times from ` +
          `CLOCK_MONOTONIC stamps (same host); Turn start over ${p.turns} Turns on a retained Executor`,
        ...roundNotes
      )
    } finally {
      for (const { receiver, sender } of Object.values(rawPairs)) {
        await sender.stop()
        await receiver.stop()
      }
      await child.stop()
      await raw.close()
      await core.dispose()
    }
    return { figures, notes }
  }
}



