/**
 * The turns suite's rounds (bench/suites/turns.ts): one Turn through the operator API (POST, then follow its event
 * stream to the outcome), a round of them over concurrent Sessions with each process's CPU and Core's store counters
 * before and after, and the raw baseline's round (the same rows in as many fsynced commits with raw `node:sqlite`,
 * one raw `ws` round trip per Turn).
 */
import { DatabaseSync } from "node:sqlite"
import { randomBytes } from "node:crypto"
import { formatNumber } from "../lib/figures.js"
import type { OperatorClient } from "./operatorClient.js"
import { type Child, op } from "./processes.js"

const oneDelta = { input: [{ content: [{ type: "input_text", text: JSON.stringify({ script: [{ delta: "The parser accepts trailing commas only in " }] }) }] }] }

export interface Round {
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
  /** When the first Session ran out of Turns (ms from the start): until then every Session of the round was active. */
  readonly allActiveMs: number
}

interface Stats {
  readonly turns: number
  readonly events: number
  readonly journalCommits: number
}


interface CpuSplit {
  readonly total: number
  readonly system: number
  /** The host only (NaN for the peer): its main thread, that thread's system part, the store's worker thread. */
  readonly main: number
  readonly mainSystem: number
  readonly worker: number
}

/** A child's CPU time so far (user + system) and its system part, µs; for the host, also per thread. */
export const cpuSplitOf = async (child: Child, kind: "host" | "peer"): Promise<CpuSplit> => {
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
export const cpuOf = async (child: Child, kind: "host" | "peer"): Promise<number> => (await cpuSplitOf(child, kind)).total

const statsOf = async (host: Child): Promise<Stats> => {
  host.send({ op: "stats" })
  return (await host.next(op("stats"))) as unknown as Stats
}

/**
 * What a Turn of a diagnostic round does besides the figure's POST and follow (BENCH_TURNS_DIAG, docs/performance.md
 * "tpath"): a second live follower of its event stream, a POST refused 400 by its schema (an operator request
 * with a body that reaches no store and no Turn), or a second follow after the outcome (a replay).
 */
export type Extra = "none" | "follower" | "invalid-post" | "replay"

/** POSTs one Turn and follows it to its outcome (plus `extra`); returns the POST's response time (ms). */
export const oneTurn = async (client: OperatorClient, sessionId: string, extra: Extra = "none"): Promise<number> => {
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

export const createSession = async (client: OperatorClient): Promise<string> => {
  const created = await client.call("POST", "/sessions", { agent_kind: "scripted" })
  if (created.status !== 201) throw new Error(`POST /sessions answered ${created.status}`)
  return (created.body as { session_id: string }).session_id
}

/** `sessions.length` Sessions each run `perSession` Turns in sequence, all Sessions concurrently. */
export const turnsRound = async (
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
  let allActiveMs: number | undefined
  await Promise.all(sessions.map(async (sessionId) => {
    for (let i = 0; i < perSession; i++) postMs.push(await oneTurn(client, sessionId, extra))
    allActiveMs ??= performance.now() - t0
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
    postMs,
    allActiveMs: allActiveMs ?? wallMs
  }
}

export interface RawRound {
  readonly turns: number
  readonly wallMs: number
  readonly selfCpuUs: number
  readonly peerCpuUs: number
}

/**
 * The baseline: the same rows in the same number of fsynced commits with raw node:sqlite (WAL,
 * synchronous=FULL), and one raw ws round trip per Turn.
 */
export const rawRound = async (file: string, peer: Child, echo: () => Promise<number>, like: Round): Promise<RawRound> => {
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

export const waitOnline = async (client: OperatorClient, deviceId: string, timeoutMs: number) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    const got = await client.call("GET", `/devices/${deviceId}`)
    const view = got.body as { online?: boolean; declaration?: unknown } | undefined
    if (got.status === 200 && view?.online === true && view.declaration !== null) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`device ${deviceId} did not come online within ${timeoutMs} ms`)
}

export const rate = (r: { readonly turns: number; readonly wallMs: number }) => r.turns / (r.wallMs / 1000)

/** A full round of the suite: the figure's Sessions, the raw baseline after them, the control (one Session). */
export interface FullRound {
  readonly f: Round
  readonly b: RawRound
  readonly c: Round
}

/** The log line of a full round: rates, each process's CPU per Turn with Core's split by thread, the store's counts. */
export const describeRound = (label: string, { b, c, f }: FullRound): string =>
  `${label}: ${formatNumber(rate(f))} Turns/s, Core ${formatNumber(f.coreCpuUs / f.turns)} µs ` +
  `(${formatNumber(f.coreSysUs / f.turns)} system; main thread ${formatNumber(f.coreMainUs / f.turns)} of it ` +
  `${formatNumber(f.coreMainSysUs / f.turns)} system, store worker ${formatNumber(f.coreWorkerUs / f.turns)}, other threads ` +
  `${formatNumber((f.coreCpuUs - f.coreMainUs - f.coreWorkerUs) / f.turns)}), daemon ${formatNumber(f.daemonCpuUs / f.turns)} µs ` +
  `(${formatNumber(f.daemonSysUs / f.turns)} system) CPU per Turn, ${formatNumber(f.events / f.turns)} journal rows ` +
  `and ${formatNumber(f.journalCommits / f.turns)} journal commits per Turn; raw ${formatNumber(rate(b))}/s ` +
  `(${formatNumber(b.selfCpuUs / b.turns)} µs CPU per Turn); one Session ${formatNumber(rate(c))}/s; every Session ` +
  `active for ${formatNumber((100 * f.allActiveMs) / f.wallMs)} % of the round`
