/**
 * Turns suite (issue 18, "≥ 800 one-delta Turns/s per core end to end through the operator API" and "POST /turns
 * cost flat from the 1st to the 10,000th Turn of a Session"). Three processes on loopback: the bench drives the
 * operator API over HTTP; `gateway-host` (mode `devcore`) is the dev Core (`DevCore.layer`, embedded SQLite in a
 * throwaway data directory, `synchronous=FULL`); `runtime-peer` is the real daemon (`Daemon.run`, the scripted
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
 * - negative control: the same path with one Session (Turns strictly one after another, nothing to batch), judged
 *   by the same targets; it must miss.
 * - growth: one Session whose store holds L earlier (seeded) finished Turns, L = 1k / 5k / 10k, then K real Turns;
 *   POST /turns response time (bench clock) and Core CPU per Turn at each level; flat = last level vs middle.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { randomBytes } from "node:crypto"
import { figure, type Figure, formatNumber, lastVsMiddle } from "../lib/figures.js"
import { percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices } from "../support/core.js"
import { type OperatorClient, operatorClient } from "../support/operatorClient.js"
import { benchTempDir, type Child, op, spawnChild } from "../support/processes.js"
import { startRawServer } from "../support/rawServer.js"

const oneDelta = { input: [{ content: [{ type: "input_text", text: JSON.stringify({ script: [{ delta: "The parser accepts trailing commas only in " }] }) }] }] }

interface Round {
  readonly turns: number
  readonly wallMs: number
  readonly coreCpuUs: number
  readonly coreSysUs: number
  /** Core's main thread (the event loop) and its system part; the SQLite store's worker thread (the rest of the
   * process is V8's and libuv's helper threads: concurrent GC, the thread pool). */
  readonly coreMainUs: number
  readonly coreMainSysUs: number
  readonly coreWorkerUs: number
  readonly daemonCpuUs: number
  readonly daemonSysUs: number
  /** Core's store over the round: journal rows and group commits. */
  readonly events: number
  readonly journalCommits: number
  readonly postMs: ReadonlyArray<number>
}

interface Stats {
  readonly turns: number
  readonly events: number
  readonly journalCommits: number
}

const median = (xs: ReadonlyArray<number>): number => percentile(xs, 50)

interface CpuSplit {
  readonly total: number
  readonly system: number
  /** The host only (NaN for the peer): its main thread, that thread's system part, the store's worker thread. */
  readonly main: number
  readonly mainSystem: number
  readonly worker: number
}

/** A child's CPU time so far (user + system) and its system part, µs; for the host, also per thread. */
const cpuSplitOf = async (child: Child, kind: "host" | "peer"): Promise<CpuSplit> => {
  child.send(kind === "host" ? { op: "measure", collect: false } : { op: "cpu" })
  const reply = (kind === "host" ? await child.next(op("measured")) : await child.next(op("cpu"))) as unknown as {
    readonly cpuMicros?: number
    readonly micros?: number
    readonly systemMicros: number
    readonly mainThreadMicros?: number
    readonly mainThreadSystemMicros?: number
    readonly workerMicros?: number
  }
  return {
    total: reply.cpuMicros ?? reply.micros ?? Number.NaN,
    system: reply.systemMicros,
    main: reply.mainThreadMicros ?? Number.NaN,
    mainSystem: reply.mainThreadSystemMicros ?? Number.NaN,
    worker: reply.workerMicros ?? Number.NaN
  }
}
const cpuOf = async (child: Child, kind: "host" | "peer"): Promise<number> => (await cpuSplitOf(child, kind)).total

const statsOf = async (host: Child): Promise<Stats> => {
  host.send({ op: "stats" })
  return (await host.next(op("stats"))) as unknown as Stats
}

/**
 * What a Turn of a diagnostic round does besides the figure's POST and follow (BENCH_TURNS_DIAG, docs/performance.md
 * "tpath"): a second live follower of its event stream, a POST refused 400 by its schema (an operator request
 * with a body that reaches no store and no Turn), or a second follow after the outcome (a replay).
 */
type Extra = "none" | "follower" | "invalid-post" | "replay"

/** POSTs one Turn and follows it to its outcome (plus `extra`); returns the POST's response time (ms). */
const oneTurn = async (client: OperatorClient, sessionId: string, extra: Extra = "none"): Promise<number> => {
  const posted = await client.call("POST", `/sessions/${sessionId}/turns`, oneDelta)
  if (posted.status !== 202) throw new Error(`POST /turns answered ${posted.status}: ${JSON.stringify(posted.body).slice(0, 200)}`)
  const turnId = (posted.body as { turn_id: string }).turn_id
  const [status] = await Promise.all(extra === "follower" ? [client.follow(turnId), client.follow(turnId)] : [client.follow(turnId)])
  if (status !== "completed") throw new Error(`a Turn ended ${status}`)
  if (extra === "invalid-post") {
    const refused = await client.call("POST", `/sessions/${sessionId}/turns`, {})
    if (refused.status !== 400) throw new Error(`an invalid POST /turns answered ${refused.status}`)
  }
  if (extra === "replay" && (await client.follow(turnId)) !== "completed") throw new Error("a replayed Turn did not end completed")
  return posted.ms
}

const createSession = async (client: OperatorClient): Promise<string> => {
  const created = await client.call("POST", "/sessions", { agent_kind: "scripted" })
  if (created.status !== 201) throw new Error(`POST /sessions answered ${created.status}`)
  return (created.body as { session_id: string }).session_id
}

/** `sessions.length` Sessions each run `perSession` Turns in sequence, all Sessions concurrently. */
const turnsRound = async (
  host: Child,
  peer: Child,
  client: OperatorClient,
  sessions: ReadonlyArray<string>,
  perSession: number,
  extra: Extra = "none"
): Promise<Round> => {
  const s0 = await statsOf(host)
  const core0 = await cpuSplitOf(host, "host")
  const daemon0 = await cpuSplitOf(peer, "peer")
  const postMs: Array<number> = []
  const t0 = performance.now()
  await Promise.all(sessions.map(async (sessionId) => {
    for (let i = 0; i < perSession; i++) postMs.push(await oneTurn(client, sessionId, extra))
  }))
  const wallMs = performance.now() - t0
  const core1 = await cpuSplitOf(host, "host")
  const daemon1 = await cpuSplitOf(peer, "peer")
  const s1 = await statsOf(host)
  return {
    turns: sessions.length * perSession,
    wallMs,
    coreCpuUs: core1.total - core0.total,
    coreSysUs: core1.system - core0.system,
    coreMainUs: core1.main - core0.main,
    coreMainSysUs: core1.mainSystem - core0.mainSystem,
    coreWorkerUs: core1.worker - core0.worker,
    daemonCpuUs: daemon1.total - daemon0.total,
    daemonSysUs: daemon1.system - daemon0.system,
    events: s1.events - s0.events,
    journalCommits: s1.journalCommits - s0.journalCommits,
    postMs
  }
}

interface RawRound {
  readonly turns: number
  readonly wallMs: number
  readonly selfCpuUs: number
  readonly peerCpuUs: number
}

/**
 * The baseline: the same rows in the same number of fsynced commits with raw node:sqlite (WAL,
 * synchronous=FULL), and one raw ws round trip per Turn.
 */
const rawRound = async (file: string, peer: Child, echo: () => Promise<number>, like: Round): Promise<RawRound> => {
  const db = new DatabaseSync(file)
  try {
    db.exec("PRAGMA journal_mode = WAL")
    db.exec("PRAGMA synchronous = FULL")
    db.exec(`CREATE TABLE IF NOT EXISTS turns (turn_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL,
      attempt INTEGER NOT NULL, input_json TEXT NOT NULL, created_at_ms BIGINT NOT NULL, completed_at_ms BIGINT)`)
    db.exec(`CREATE TABLE IF NOT EXISTS turn_events (turn_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
      body_json TEXT NOT NULL, received_at_ms BIGINT NOT NULL, PRIMARY KEY (turn_id, seq))`)
    const perTurn = Math.max(1, Math.round(like.events / like.turns))
    const commits = Math.max(1, like.journalCommits + 3 * like.turns)
    const tag = randomBytes(6).toString("hex")
    const input = JSON.stringify(oneDelta.input)
    const body = JSON.stringify({ type: "delta", id: "run-0123456789abcdef", payload: { delta: "The parser accepts trailing commas only in ", sequence: 1 } })
    // Every row write of the round, in order: per Turn, create, its journal rows, begin attempt, complete.
    type Write = () => void
    const insertTurn = db.prepare("INSERT INTO turns VALUES (?, 's', 'queued', 0, ?, ?, NULL)")
    const updateTurn = db.prepare("UPDATE turns SET status = ?, attempt = 1, completed_at_ms = ? WHERE turn_id = ?")
    const insertEvent = db.prepare("INSERT INTO turn_events VALUES (?, ?, 'frame', ?, ?)")
    const writes: Array<Write> = []
    for (let t = 0; t < like.turns; t++) {
      const id = `${tag}-${t}`
      writes.push(() => insertTurn.run(id, input, Date.now()))
      writes.push(() => updateTurn.run("running", null, id))
      for (let e = 1; e <= perTurn; e++) writes.push(() => insertEvent.run(id, e, body, Date.now()))
      writes.push(() => updateTurn.run("completed", Date.now(), id))
    }
    const peer0 = await cpuOf(peer, "peer")
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    for (let c = 0; c < commits; c++) {
      const from = Math.floor((c * writes.length) / commits)
      const to = Math.floor(((c + 1) * writes.length) / commits)
      db.exec("BEGIN IMMEDIATE")
      for (let w = from; w < to; w++) writes[w]!()
      db.exec("COMMIT")
    }
    for (let t = 0; t < like.turns; t++) await echo()
    const wallMs = performance.now() - t0
    const c1 = process.cpuUsage(c0)
    const peer1 = await cpuOf(peer, "peer")
    return { turns: like.turns, wallMs, selfCpuUs: c1.user + c1.system, peerCpuUs: peer1 - peer0 }
  } finally {
    db.close()
  }
}

const waitOnline = async (client: OperatorClient, deviceId: string, timeoutMs: number) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    const got = await client.call("GET", `/devices/${deviceId}`)
    const view = got.body as { online?: boolean; declaration?: unknown } | undefined
    if (got.status === 200 && view?.online === true && view.declaration !== null) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`device ${deviceId} did not come online within ${timeoutMs} ms`)
}

export const turnsSuite: Suite = {
  name: "turns",
  describe: "one-delta Turns through the operator API (dev Core + real daemon child) vs raw durable writes + raw ws; POST /turns at 1k/5k/10k Turns",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const p = ctx.quick
      ? { rounds: 2, concurrency: 8, perSession: 5, controlTurns: 5, levels: [100, 500, 1000], perLevel: 10 }
      : { rounds: 7, concurrency: 16, perSession: 10, controlTurns: 20, levels: [1000, 5000, 10_000], perLevel: 30 }
    const [device] = makeDevices("turns", 1)
    const token = `bench-${randomBytes(18).toString("base64url")}`
    const host = spawnChild(ctx.self, "gateway-host")
    const peer = spawnChild(ctx.self, "runtime-peer")
    const raw = await startRawServer()
    const dir = mkdtempSync(join(benchTempDir(), "turns-"))
    let client: OperatorClient | undefined
    try {
      host.send({ op: "start", mode: "devcore", devices: [device!], heartbeatSeconds: 15, operatorToken: token })
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
      client = operatorClient(baseUrl, token)
      await waitOnline(client, device!.deviceId, 60_000)
      const sessions: Array<string> = []
      for (let i = 0; i < p.concurrency; i++) sessions.push(await createSession(client))
      const serial = [await createSession(client)]

      ctx.log(`turns: warm-up`)
      await turnsRound(host, peer, client, sessions, 2)
      await turnsRound(host, peer, client, serial, 2)
      await rawRound(join(dir, "warm.db"), peer, raw.echo, { turns: 20, wallMs: 0, coreCpuUs: 0, coreSysUs: 0, coreMainUs: 0, coreMainSysUs: 0, coreWorkerUs: 0, daemonCpuUs: 0, daemonSysUs: 0, events: 200, journalCommits: 20, postMs: [] })

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
        const f = await turnsRound(host, peer, client, sessions, p.perSession)
        const b = await rawRound(join(dir, `raw-${r}.db`), peer, raw.echo, f)
        const c = await turnsRound(host, peer, client, serial, p.controlTurns)
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
        ctx.log(
          `turns round ${r + 1}/${p.rounds}: ${formatNumber(rate(f))} Turns/s, Core ${formatNumber(f.coreCpuUs / f.turns)} µs ` +
            `(${formatNumber(f.coreSysUs / f.turns)} system; main thread ${formatNumber(f.coreMainUs / f.turns)} of it ` +
            `${formatNumber(f.coreMainSysUs / f.turns)} system, store worker ${formatNumber(f.coreWorkerUs / f.turns)}, other threads ` +
            `${formatNumber((f.coreCpuUs - f.coreMainUs - f.coreWorkerUs) / f.turns)}), daemon ${formatNumber(f.daemonCpuUs / f.turns)} µs ` +
            `(${formatNumber(f.daemonSysUs / f.turns)} system) CPU per Turn, ${formatNumber(f.events / f.turns)} journal rows ` +
            `and ${formatNumber(f.journalCommits / f.turns)} journal commits per Turn; raw ${formatNumber(rate(b))}/s; ` +
            `one Session ${formatNumber(rate(c))}/s`
        )
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
          note: "Turns per CPU-second of the Core process (1e6 / Core CPU µs per Turn); the POST, dispatch, journal, SSE follow to the outcome"
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
            `${formatNumber(median(figureRounds.map((f) => f.journalCommits / f.turns)))}`
        }),
        figure({
          suite: "turns",
          name: "CPU per Turn, daemon process",
          unit: "µs",
          samples: figureRounds.map((f) => f.daemonCpuUs / f.turns),
          baseline: { name: "raw ws echo peer", samples: rawRounds.map((b) => b.peerCpuUs / b.turns) },
          note: `system (kernel) part ${formatNumber(median(figureRounds.map((f) => f.daemonSysUs / f.turns)))} µs`
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
        `turns: ${p.rounds} interleaved rounds of ${p.concurrency} Sessions × ${p.perSession} one-delta scripted Turns (POST, then ` +
          `follow the SSE stream to the outcome), the raw baseline, and the control (one Session, ${p.controlTurns} Turns); ` +
          `dev Core in a child (embedded SQLite, synchronous=FULL), the real daemon in another (max active ${p.concurrency + 2}); ` +
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

const rate = (r: { readonly turns: number; readonly wallMs: number }) => r.turns / (r.wallMs / 1000)
