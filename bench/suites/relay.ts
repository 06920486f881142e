/**
 * Relay and latency suite (issue items 2 and 3), between two processes on loopback: the bench process is Core
 * (the real gateway: `GatewayServer`, a `DeviceSession`, `subscribeDurable`), the `runtime-peer` child is the
 * Runtime (the real daemon: Connector, WebSocket Transport, Connection, the scripted harness). The baseline of
 * each figure is raw `ws` between the same two processes, measured in alternating rounds.
 *
 * - relay: deltas per second from the scripted harness to Core's Run subscriber (first to last delta of a Turn
 *   of N deltas), against N prebuilt frames of the same shape sent with `ws.send` as fast as it takes them.
 * - per-frame latency: the `stamped` harness writes the CLOCK_MONOTONIC time of each emission into its delta;
 *   Core takes the difference when the subscriber sees it. Frames are paced (one per `intervalMs`), so this is
 *   latency without queueing. The raw baseline stamps at `ws.send`. Reported per round: the through-daemon and
 *   raw p50 and p99; the added latency is the difference of the medians (daemon p50 − raw p50); the p99 target
 *   (< 1 ms) is judged on daemon p99 − raw p99 in every round, i.e. on the worst round.
 * - Turn start: prepare → ready → start → first delta of a one-delta script (zero harness latency), Core's
 *   clock; the baseline is two raw round trips (the two request / reply exchanges a Turn start needs).
 */

import { figure, type Figure, formatNumber } from "../lib/figures.js"
import { distribution, percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices, runTurn, sessionOf, startCore, watchDeclared } from "../support/core.js"
import { op, spawnChild, withTimeout } from "../support/processes.js"
import { startRawServer } from "../support/rawServer.js"

/** The delta text of the relay (a typical streamed fragment). */
const DeltaText = "The parser accepts trailing commas only in "


const script = (steps: ReadonlyArray<unknown>) => JSON.stringify({ script: steps })

export const relaySuite: Suite = {
  name: "relay",
  describe: "daemon relay throughput, per-frame latency and Turn start against raw ws (two processes, loopback)",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const p = ctx.quick
      ? { relayRounds: 2, relayFrames: 1000, latencyRounds: 1, latencyFrames: 100, intervalMs: 1, turns: 5 }
      : { relayRounds: 5, relayFrames: 10_000, latencyRounds: 3, latencyFrames: 2000, intervalMs: 1, turns: 40 }
    const [device] = makeDevices("relay", 1)
    // The gateway as configured by default (Run subscriber buffer 1024, yielding to a backlogged subscriber).
    const core = await startCore([device!], {})
    const raw = await startRawServer()
    const child = spawnChild(ctx.self, "runtime-peer")
    const figures: Array<Figure> = []
    const notes: Array<string> = []
    try {
      child.send({ op: "raw", url: raw.url })
      await Promise.all([raw.connected, child.next(op("raw-ready"))])
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
      const relayScript = script(Array.from({ length: p.relayFrames }, () => ({ delta: DeltaText })))
      ctx.log(`relay: warm-up`)
      await turn("scripted", script(Array.from({ length: Math.min(2000, p.relayFrames) }, () => ({ delta: DeltaText }))))
      await raw.burst(Math.min(2000, p.relayFrames), "run-raw-warm", DeltaText)
      const relayRates: Array<number> = []
      const rawRates: Array<number> = []
      for (let r = 0; r < p.relayRounds; r++) {
        ctx.log(`relay: round ${r + 1}/${p.relayRounds} (${p.relayFrames} frames each way)`)
        const b = await raw.burst(p.relayFrames, `run-raw-${r}`, DeltaText)
        rawRates.push(((p.relayFrames - 1) * 1000) / (b.last - b.first))
        const t = await turn("scripted", relayScript)
        if (t.deltas !== p.relayFrames) throw new Error(`relay: ${t.deltas} deltas reached Core, expected ${p.relayFrames}`)
        relayRates.push(((t.deltas - 1) * 1000) / (t.lastDelta - t.firstDelta))
      }
      figures.push(figure({
        suite: "relay",
        name: "deltas harness → daemon → Core subscriber",
        unit: "frames/s",
        samples: relayRates,
        baseline: { name: "raw ws", samples: rawRates },
        target: { on: "ratio", op: ">=", value: 0.6 }
      }))

      // ------------------------------------------------------------------ per-frame latency
      const latencyScript = script(
        Array.from({ length: p.latencyFrames }, () => [{ delta: "x" }, { sleep: p.intervalMs }]).flat()
      )
      const added50: Array<number> = []
      const added99: Array<number> = []
      const daemon50: Array<number> = []
      const daemon99: Array<number> = []
      const raw50: Array<number> = []
      const raw99: Array<number> = []
      for (let r = 0; r < p.latencyRounds; r++) {
        ctx.log(`latency: round ${r + 1}/${p.latencyRounds} (${p.latencyFrames} paced frames each way)`)
        const rawLatencies = await raw.paced(p.latencyFrames, p.intervalMs, `run-raw-paced-${r}`)
        const daemonLatencies: Array<number> = []
        await turn("stamped", latencyScript, (delta) => {
          daemonLatencies.push(Number(process.hrtime.bigint() - BigInt(delta.payload.delta)) / 1e6)
        })
        const d = distribution(daemonLatencies)
        const w = distribution(rawLatencies)
        daemon50.push(d.p50)
        daemon99.push(d.p99)
        raw50.push(w.p50)
        raw99.push(w.p99)
        added50.push(d.p50 - w.p50)
        added99.push(d.p99 - w.p99)
      }
      figures.push(
        figure({
          suite: "latency",
          name: "per-frame latency p50 through daemon",
          unit: "ms",
          samples: daemon50,
          baseline: { name: "raw ws p50", samples: raw50 },
          note: "p50 of each round's frames; ratio is daemon p50 / raw p50 of the same round"
        }),
        figure({
          suite: "latency",
          name: "per-frame latency p99 through daemon",
          unit: "ms",
          samples: daemon99,
          baseline: { name: "raw ws p99", samples: raw99 },
          note: "p99 of each round's frames; ratio is daemon p99 / raw p99 of the same round"
        }),
        figure({
          suite: "latency",
          name: "added per-frame latency (daemon p50 − raw p50)",
          unit: "ms",
          samples: added50,
          note: "the difference of the two medians per round (not a percentile of per-frame differences: the two paths " +
            "carry different frames)"
        }),
        figure({
          suite: "latency",
          name: "added p99 (daemon p99 − raw p99), worst round",
          unit: "ms",
          samples: added99,
          target: { on: "value", op: "<", value: 1, over: "every" },
          note: "judged on every round (the max); a negative round only means raw ws had the larger tail in that round"
        })
      )
      const roundNotes: Array<string> = []
      for (let r = 0; r < daemon50.length; r++) {
        roundNotes.push(
          `latency round ${r + 1}: through daemon p50 ${formatNumber(daemon50[r]!)} / p99 ${formatNumber(daemon99[r]!)} ms; ` +
            `raw ws p50 ${formatNumber(raw50[r]!)} / p99 ${formatNumber(raw99[r]!)} ms; added p50 ` +
            `${formatNumber(added50[r]!)} ms, p99 difference ${formatNumber(added99[r]!)} ms`
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
        `relay: two processes (bench = Core gateway, child = daemon + raw ws client), loopback; the gateway's default Run ` +
          `subscriber buffer (1024); ${p.relayRounds} rounds of ` +
          `${p.relayFrames} deltas of ${DeltaText.length} characters each way, alternating raw and daemon`,
        `latency: ${p.latencyRounds} rounds of ${p.latencyFrames} frames paced every ${p.intervalMs} ms; one-way times from ` +
          `CLOCK_MONOTONIC stamps (same host); Turn start over ${p.turns} Turns on a retained Executor`,
        ...roundNotes
      )
    } finally {
      await child.stop()
      await raw.close()
      await core.dispose()
    }
    return { figures, notes }
  }
}



