/**
 * Turns suite (issue 18, "≥ 800 one-delta Turns/s per core end to end through the operator API" and "POST /turns
 * cost flat from the 1st to the 10,000th Turn of a Session"). Three processes on loopback: the bench drives the
 * operator API over HTTP; `gateway-host` (mode `devcore`) is the dev Core (`DevCore.layer`, embedded SQLite in a
 * throwaway data directory, `synchronous=FULL`, logging at info with the binary's logger); `runtime-peer` is the real daemon (`Daemon.run`, the scripted
 * harness), which also holds the raw `ws` client of the baseline.
 *
 * - figure: `C` Sessions, each running one-delta scripted Turns one after another (`POST /sessions/{id}/turns`,
 *   then `GET /turns/{id}/events` to its `outcome` event, which must be `completed`), all `C` concurrently.
 *   Turns per second (wall clock), and each process's CPU time over the round divided by the Turns (Core, daemon);
 *   "per core" = Turns per CPU-second of Core = 1e6 / Core's CPU µs per Turn.
 * - baseline (the same durable work, no framework): with raw `node:sqlite` in this process, the rows the round
 *   left in Core's store (per Turn: the Turn row, its journal rows, two updates) in WAL + `synchronous=FULL`,
 *   in as many transactions as Core committed (the journal's group commits, measured, plus the Turn's three
 *   own writes: create, begin attempt, complete), and one raw `ws` round trip per Turn with the same child.
 * - warm-up: full unmeasured rounds (figure, baseline, control) until Core's CPU per Turn is within 10 % of the
 *   previous round's (at least 30, at most 40; bench/support/warmUp.ts), logged and named in the figures' notes: the
 *   figures are the steady state of a Core that has run a while, not its first thousands of Turns of JIT tiering
 *   (Core's CPU per Turn keeps falling for about 30 rounds, ≈ 5000 Turns; docs/performance.md "jitwarm").
 * - negative control: the same path with one Session (Turns strictly one after another, nothing to batch), judged
 *   by the same targets; it must miss.
 * - growth: one Session whose store holds L earlier (seeded) finished Turns, L = 1k / 5k / 10k, then K real Turns;
 *   POST /turns response time (bench clock) and Core CPU per Turn at each level; flat = last level vs middle.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import { randomBytes } from "node:crypto"
import { figure, type Figure, formatNumber, lastVsMiddle } from "../lib/figures.js"
import { percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices } from "../support/core.js"
import { type OperatorClient, operatorClient } from "../support/operatorClient.js"
import { benchTempDir, op, spawnChild } from "../support/processes.js"
import { startRawServer } from "../support/rawServer.js"
import {
  cpuOf,
  createSession,
  describeRound,
  type FullRound,
  oneTurn,
  rawRound,
  type RawRound,
  rate,
  type Round,
  turnsRound,
  waitOnline
} from "../support/turnsRounds.js"
import { warmedUp, warmUpNote } from "../support/warmUp.js"

const median = (xs: ReadonlyArray<number>): number => percentile(xs, 50)

export const turnsSuite: Suite = {
  name: "turns",
  describe: "one-delta Turns through the operator API (dev Core + real daemon child) vs raw durable writes + raw ws; POST /turns at 1k/5k/10k Turns",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const p = ctx.quick
      ? { warmUp: { min: 1, max: 1, tolerance: 0.1 }, rounds: 2, concurrency: 8, perSession: 5, controlTurns: 5, levels: [100, 500, 1000], perLevel: 10 }
      : { warmUp: { min: 30, max: 40, tolerance: 0.1 }, rounds: 7, concurrency: 16, perSession: Number(process.env["BENCH_TURNS_PER_SESSION"] ?? 10), controlTurns: 20, levels: [1000, 5000, 10_000], perLevel: 30 }
    const [device] = makeDevices("turns", 1)
    const token = `bench-${randomBytes(18).toString("base64url")}`
    const host = spawnChild(ctx.self, "gateway-host")
    const peer = spawnChild(ctx.self, "runtime-peer")
    const raw = await startRawServer()
    const dir = mkdtempSync(join(benchTempDir(), "turns-"))
    let client: OperatorClient | undefined
    try {
      host.send({ op: "start", mode: "devcore", devices: [device!], heartbeatSeconds: 15, operatorToken: token, loopMonitor: false })
      const baseUrl = (await host.next(op("started"), 120_000))["baseUrl"] as string
      peer.send({ op: "raw", url: raw.url })
      await Promise.all([raw.connected, peer.next(op("raw-ready"))])
      peer.send({
        op: "daemon",
        coreUrl: baseUrl,
        deviceId: device!.deviceId,
        credential: device!.credential,
        maxActive: p.concurrency + 2,
        maxIdleExecutors: p.concurrency + 2
      })
      const operator = operatorClient(baseUrl, token)
      client = operator
      await waitOnline(client, device!.deviceId, 60_000)
      const sessions: Array<string> = []
      for (let i = 0; i < p.concurrency; i++) sessions.push(await createSession(client))
      const serial = [await createSession(client)]
      /** One full round: the figure's Sessions, the raw baseline with the same rows and commits, the control. */
      const fullRound = async (rawFile: string): Promise<FullRound> => {
        const f = await turnsRound(host, peer, operator, sessions, p.perSession)
        const b = await rawRound(join(dir, rawFile), peer, raw.echo, f)
        const c = await turnsRound(host, peer, operator, serial, p.controlTurns)
        return { f, b, c }
      }

      // Warm-up (docs/performance.md "twarm"): full unmeasured rounds, the same work as a measured one for every process
      // and contender, until Core's CPU per Turn settles (bench/support/warmUp.ts); each is logged and the figures' notes
      // name them. A fresh Core costs about twice its steady state for its first two or three rounds, and its cost keeps
      // falling for about 30 rounds while V8 tiers more of its code up ("jitwarm").
      const warm: Array<FullRound> = []
      const coreSeries = () => warm.map(({ f }) => f.coreCpuUs / f.turns)
      while (!warmedUp(p.warmUp, coreSeries())) {
        warm.push(await fullRound(`warm-${warm.length}.db`))
        ctx.log(describeRound(`turns warm-up round ${warm.length}`, warm[warm.length - 1]!))
      }
      const warmNote = `${warmUpNote(p.warmUp, coreSeries(), "µs Core CPU per Turn")} (raw baseline ` +
        `${warm.map(({ b }) => formatNumber(b.selfCpuUs / b.turns)).join(" → ")} µs, daemon ` +
        `${warm.map(({ f }) => formatNumber(f.daemonCpuUs / f.turns)).join(" → ")} µs)`
      ctx.log(`turns: ${warmNote}`)

      // BENCH_TURNS_HEAP=<n,n,…> (with BENCH_CHILD_EXEC_ARGV=--expose-gc): instead of the figures, one Session runs
      // Turns one after another and Core's heap after a full GC is logged at each count (docs/performance.md
      // "turnmem"); BENCH_TURNS_HEAP_SNAPSHOT=<dir> also writes a heap snapshot there at each count.
      const heapAt = process.env["BENCH_TURNS_HEAP"]
      if (heapAt) {
        const at = heapAt.split(",").map(Number)
        const snapshots = process.env["BENCH_TURNS_HEAP_SNAPSHOT"]
        // BENCH_TURNS_HEAP_SESSIONS=<k>: k Sessions share the counts (each runs its part one Turn after another).
        const heapSessions: Array<string> = []
        for (let i = 0; i < Number(process.env["BENCH_TURNS_HEAP_SESSIONS"] ?? 1); i++) heapSessions.push(await createSession(client))
        const notes: Array<string> = []
        let done = 0
        for (const n of at) {
          const c0 = await cpuOf(host, "host")
          const t0 = performance.now()
          const ran = n - done
          const heapClient = client
          await Promise.all(heapSessions.map(async (sessionId, k) => {
            for (let i = done + k; i < n; i += heapSessions.length) await oneTurn(heapClient, sessionId)
          }))
          done = n
          const cpuPerTurn = ((await cpuOf(host, "host")) - c0) / Math.max(1, ran)
          const wall = performance.now() - t0
          host.send({ op: "measure", collect: true })
          const m = (await host.next(op("measured"))) as unknown as { heapUsed: number; external: number; rss: number; rssReduced: number }
          if (snapshots) {
            host.send({ op: "snapshot", path: join(snapshots, `turns-${n}.heapsnapshot`) })
            await host.next(op("snapshot-written"), 300_000)
          }
          const line = `turns heap: Turn ${n}: heapUsed ${(m.heapUsed / 1024).toFixed(0)} KiB, external ${(m.external / 1024).toFixed(0)} KiB, ` +
            `rss ${(m.rss / 1048576).toFixed(1)} MiB after a full GC (${(m.rssReduced / 1048576).toFixed(1)} MiB after a ` +
            `memory-reducing one); Core CPU ${formatNumber(cpuPerTurn)} µs per Turn over the last ${ran} (${formatNumber(ran / (wall / 1000))} Turns/s)`
          ctx.log(line)
          notes.push(line)
        }
        return { figures: [], notes }
      }

      // Diagnostics (docs/performance.md "Turns through the operator API"): BENCH_TURNS_PROFILE=<file> writes a CPU
      // profile of the dev Core's main thread over the measured rounds; BENCH_TURNS_NO_GROWTH=1 skips the growth part.
      const profileTo = process.env["BENCH_TURNS_PROFILE"]
      // BENCH_TURNS_DIAG=1: after each figure round, the same round three more times, each Turn with one extra piece of
      // work (a second live follower, an invalid POST, a replay after the outcome), to price them (logged only).
      const diag = process.env["BENCH_TURNS_DIAG"] !== undefined
      if (profileTo) {
        host.send({ op: "profile" })
        await host.next(op("profiled"))
      }
      const figureRounds: Array<Round> = []
      const rawRounds: Array<RawRound> = []
      const controlRounds: Array<Round> = []
      for (let r = 0; r < p.rounds; r++) {
        const { f, b, c } = await fullRound(`raw-${r}.db`)
        figureRounds.push(f)
        rawRounds.push(b)
        controlRounds.push(c)
        if (diag) {
          // The same round with one extra piece of work per Turn each, right after the figure's round: Core CPU per
          // Turn minus the figure's is that piece's price (a live event stream, a bare operator request, a replay).
          const costs: Array<string> = []
          for (const extra of ["follower", "invalid-post", "replay"] as const) {
            const x = await turnsRound(host, peer, client, sessions, p.perSession, extra)
            const pair = { f: f.coreCpuUs / f.turns, x: x.coreCpuUs / x.turns }
            const main = { f: f.coreMainUs / f.turns, x: x.coreMainUs / x.turns }
            costs.push(`+${extra} ${formatNumber(pair.x)} µs (+${formatNumber(pair.x - pair.f)}; main thread +${formatNumber(main.x - main.f)})`)
          }
          ctx.log(`turns diag round ${r + 1}/${p.rounds}: Core CPU per Turn ${formatNumber(f.coreCpuUs / f.turns)} µs; ${costs.join(", ")}`)
        }
        ctx.log(describeRound(`turns round ${r + 1}/${p.rounds}`, { f, b, c }))
      }

      if (profileTo) {
        host.send({ op: "profile", path: profileTo })
        await host.next(op("profiled"), 60_000)
      }

      // ---------------------------------------------------------------- growth: POST /turns at L earlier Turns
      const growth = await createSession(client)
      const levels: Array<{ readonly level: number; readonly postMs: Array<number>; readonly cpuUs: Array<number> }> = []
      let have = 0
      for (const level of process.env["BENCH_TURNS_NO_GROWTH"] ? [] : p.levels) {
        host.send({ op: "seed-turns", sessionId: growth, count: level - 1 - have })
        await host.next(op("seeded"), 300_000)
        have = level - 1
        const postMs: Array<number> = []
        const cpuUs: Array<number> = []
        // The K Turns after the level, in groups of 5 (one Core CPU sample per group).
        for (let g = 0; g < p.perLevel; g += 5) {
          const c0 = await cpuOf(host, "host")
          for (let i = 0; i < 5; i++) postMs.push(await oneTurn(client, growth))
          cpuUs.push(((await cpuOf(host, "host")) - c0) / 5)
        }
        have += p.perLevel
        levels.push({ level, postMs, cpuUs })
        ctx.log(`turns growth: Turn ${level}: POST p50 ${median(postMs).toFixed(2)} ms, Core CPU ${formatNumber(median(cpuUs))} µs per Turn`)
      }

      const perCore = (us: number) => 1e6 / us
      const top = levels.length - 1
      const mid = Math.floor(top / 2)
      const figures: Array<Figure> = [
        figure({
          suite: "turns",
          name: `one-delta Turns/s per core of Core, ${p.concurrency} Sessions through the operator API`,
          unit: "Turns/s",
          samples: figureRounds.map((f) => perCore(f.coreCpuUs / f.turns)),
          baseline: { name: "raw node:sqlite same rows + commits, raw ws round trip", samples: rawRounds.map((b) => perCore(b.selfCpuUs / b.turns)) },
          target: { on: "value", op: ">=", value: 800 },
          control: { name: "one Session (Turns in sequence)", samples: controlRounds.map((c) => perCore(c.coreCpuUs / c.turns)) },
          note: "Turns per CPU-second of the Core process (1e6 / Core CPU µs per Turn); the POST, dispatch, journal, SSE follow to the outcome; " +
            `steady state, after ${warmNote}`
        }),
        figure({
          suite: "turns",
          name: `one-delta Turns/s (wall), ${p.concurrency} Sessions`,
          unit: "Turns/s",
          samples: figureRounds.map(rate),
          baseline: { name: "raw node:sqlite same rows + commits, raw ws round trip", samples: rawRounds.map(rate) },
          target: { on: "value", op: ">=", value: 800 },
          control: { name: "one Session (Turns in sequence)", samples: controlRounds.map(rate) },
          note: "three processes on a shared 2-core machine (bench client, Core, daemon)"
        }),
        figure({
          suite: "turns",
          name: "CPU per Turn, Core process",
          unit: "µs",
          samples: figureRounds.map((f) => f.coreCpuUs / f.turns),
          baseline: { name: "raw sqlite writes + ws receiver", samples: rawRounds.map((b) => b.selfCpuUs / b.turns) },
          note: `system (kernel) part ${formatNumber(median(figureRounds.map((f) => f.coreSysUs / f.turns)))} µs; main thread ` +
            `${formatNumber(median(figureRounds.map((f) => f.coreMainUs / f.turns)))} µs (system ` +
            `${formatNumber(median(figureRounds.map((f) => f.coreMainSysUs / f.turns)))}), store worker thread ` +
            `${formatNumber(median(figureRounds.map((f) => f.coreWorkerUs / f.turns)))} µs; journal rows per Turn ${formatNumber(median(figureRounds.map((f) => f.events / f.turns)))}, journal commits per Turn ` +
            `${formatNumber(median(figureRounds.map((f) => f.journalCommits / f.turns)))}; measured after ${warmNote}`
        }),
        figure({
          suite: "turns",
          name: "CPU per Turn, daemon process",
          unit: "µs",
          samples: figureRounds.map((f) => f.daemonCpuUs / f.turns),
          baseline: { name: "raw ws echo peer", samples: rawRounds.map((b) => b.peerCpuUs / b.turns) },
          note: `system (kernel) part ${formatNumber(median(figureRounds.map((f) => f.daemonSysUs / f.turns)))} µs; measured after the warm-up (see Core)`
        }),
        figure({
          suite: "turns",
          name: `POST /turns response p50, ${p.concurrency} Sessions`,
          unit: "ms",
          samples: figureRounds.map((f) => median(f.postMs))
        }),
        ...levels.map((l) =>
          figure({ suite: "turns", name: `POST /turns @ Turn ${l.level} of one Session`, unit: "ms", samples: l.postMs })),
        ...(levels.length === 0 ? [] : [figure({
          suite: "turns",
          name: `POST /turns @ Turn ${levels[top]!.level} vs @ Turn ${levels[mid]!.level}`,
          unit: "×",
          samples: levels[top]!.postMs.map((x) => lastVsMiddle([median(levels[mid]!.postMs), x])),
          target: { on: "value", op: "<=", value: 1.1 },
          note: "each POST's response time at the last level over the median at the middle level; flat = within 10 %"
        }), figure({
          suite: "turns",
          name: `Core CPU per Turn @ Turn ${levels[top]!.level} vs @ Turn ${levels[mid]!.level}`,
          unit: "×",
          samples: levels[top]!.cpuUs.map((x) => lastVsMiddle([median(levels[mid]!.cpuUs), x])),
          target: { on: "value", op: "<=", value: 1.1 },
          note: "Core's CPU per Turn (groups of 5 Turns) at the last level over the median at the middle level"
        })])
      ]
      const notes = [
        `turns: ${warmNote}, then ${p.rounds} interleaved rounds of ${p.concurrency} Sessions × ${p.perSession} one-delta scripted Turns (POST, then ` +
          `follow the SSE stream to the outcome), the raw baseline, and the control (one Session, ${p.controlTurns} Turns); ` +
          `dev Core in a child (embedded SQLite, synchronous=FULL, logging at info as agentwire core does), the real daemon in another (max active ${p.concurrency + 2}); ` +
          `growth: one Session with ${p.levels.join(" / ")} earlier Turns (seeded finished rows), ${p.perLevel} real Turns per level`,
        `turns growth: POST p50 per level ${levels.map((l) => `${l.level}: ${median(l.postMs).toFixed(2)} ms`).join(", ")}; ` +
          `Core CPU per Turn ${levels.map((l) => `${l.level}: ${formatNumber(median(l.cpuUs))} µs`).join(", ")}`
      ]
      return { figures, notes }
    } finally {
      client?.close()
      await peer.stop()
      await host.stop()
      await raw.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

