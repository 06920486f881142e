/**
 * Durable-path suite (issue 18, "durable events"): Run events journaled the way a Turn's runner journals them,
 * on a file-backed SQLite store with every commit fsynced (`synchronous=FULL`, the default `--durability full`).
 *
 * - figure: `T` Turns journal their deltas concurrently, each through its own `JournalWriter.record` (encode
 *   the frame, append through the store's group commit, publish to live readers), one fact in flight per Turn as
 *   in `TurnRunner` (the next fact waits for the previous one's commit). Judged: events per CPU-second of this
 *   process ("per core": 1e6 / CPU µs per event, the worker thread included) and CPU µs per event; the wall-clock
 *   events/s is reported beside them, not judged (on these VMs the disk's fsync per commit bounds it).
 * - baseline (same work below the framework): the same rows (the same encoded frame bodies) inserted with raw
 *   `node:sqlite` into the same schema in the same durability (WAL, `synchronous=FULL`), in as many transactions
 *   as the group commit made in the same round (so the number of commits, i.e. of WAL fsyncs, is equal), with
 *   the rows spread evenly over them.
 * - wide: `W` = 256 Turns in flight (more than a batch of 64 holds), batches up to the default `maxBatch` (256),
 *   against the raw baseline at its own commit count: what raising the batch buys when the fsync bounds events/s.
 * - negative control: the same durable path with group commit off (one transaction per fact, the old path);
 *   judged by the same targets, it must miss.
 *
 * - store off the event loop (issue 18): the same durable path with the in-thread store (`node:sqlite` calls on
 *   the event loop, the store before the worker) gives the "before" events/s; and 16 Turns journal concurrently
 *   while `monitorEventLoopDelay` (1 ms resolution) records the main thread's event-loop delay, once with the
 *   default worker store and once with the in-thread store (the negative control, which must miss the targets).
 *   Both run under the condition the worker store exists for: another process (`support/writeLockHolder.ts`)
 *   holds the database's write lock 80 ms of every 250 ms, as a second connection does (a credential created
 *   from the CLI, a backup), so commits wait in SQLite's busy handler: on the worker thread for the worker store,
 *   on the event loop for the in-thread store. Without it, on a quiet machine, the in-thread store's statements
 *   are short enough that its loop met ≤ 20 ms (5.39 ms max at 06:54 on 2026-12-03): a control that could not fail.
 *
 * Rounds are interleaved (figure, baseline, control, in-thread, event-loop runs), each in a fresh database file
 * in the bench's temporary directory. The commit count comes from the store's own metric
 * (`agentwire_core_journal_transaction_writes`). CPU is the whole process's (`process.cpuUsage`), so the
 * worker thread's statements count.
 */
import { Effect, Layer, Logger, ManagedRuntime, Metric, References } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { DatabaseSync } from "node:sqlite"
import { DevIds } from "../../src/core/dev/DevIds.js"
import * as SessionStore from "../../src/core/dev/SessionStore.js"
import * as Store from "../../src/core/dev/Store.js"
import { encodeFrame, layer as journalLayer, TurnJournal } from "../../src/core/dev/TurnJournal.js"
import * as TurnStore from "../../src/core/dev/TurnStore.js"
import { journalTransactionWrites } from "../../src/core/dev/TurnTelemetry.js"
import type * as Outcome from "../../src/core/Outcome.js"
import { Ids, MessageInput } from "../../src/proto/index.js"
import { figure, type Figure, formatNumber } from "../lib/figures.js"
import { percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { benchTempDir } from "../support/processes.js"
import { type LockHolderOptions, startWriteLockHolder } from "../support/writeLockHolder.js"

/** The delta text (a typical streamed fragment, as in the relay suite). */
const DeltaText = "The parser accepts trailing commas only in "

const deltaEvent = (runId: Ids.RunId, sequence: number) =>
  ({ type: "delta", id: runId, payload: { delta: DeltaText, sequence } }) as const

const deltaOf = (runId: Ids.RunId, sequence: number): Outcome.TurnFact => ({ _tag: "RunEvent", event: deltaEvent(runId, sequence) })

interface RunResult {
  readonly events: number
  readonly wallMs: number
  readonly cpuUs: number
  /** The system (kernel) part of `cpuUs`: the writes and fsyncs. */
  readonly sysUs: number
  readonly commits: number
  /** The main thread's event-loop delay over the run (ms): p99 and max (`monitorEventLoopDelay`, 1 ms resolution). */
  readonly loop: { readonly p99Ms: number; readonly maxMs: number }
  /** The write-lock holds another process made during the run (absent without a holder). */
  readonly holds?: { readonly holds: number; readonly heldMs: number }
}

const cpuNow = (): number => {
  const u = process.cpuUsage()
  return u.user + u.system
}
const sysNow = (): number => process.cpuUsage().system

/** The store with the journal, on a fresh file, with group commit as given (maxBatch 1: one commit per fact). */
const storeRuntime = (file: string, maxBatch: number | undefined, driver: Store.SqliteDriver) => {
  const sql = Store.sqlLayer(file, "full", driver)
  const repositories = Layer.mergeAll(
    SessionStore.layer,
    TurnStore.layerWith(maxBatch === undefined ? {} : { groupCommit: { maxBatch } })
  ).pipe(Layer.provideMerge(sql), Layer.provide(DevIds.layer))
  return ManagedRuntime.make(
    journalLayer.pipe(
      Layer.provideMerge(repositories),
      Layer.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])),
      Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
    )
  )
}

/** `turns` Turns journal `perTurn` deltas each, concurrently, one fact in flight per Turn. */
const durableRun = async (
  dir: string,
  name: string,
  turns: number,
  perTurn: number,
  options: { readonly maxBatch?: number; readonly driver?: Store.SqliteDriver; readonly lockHolder?: LockHolderOptions } = {}
): Promise<RunResult> => {
  const file = join(dir, `${name}.db`)
  const runtime = storeRuntime(file, options.maxBatch, options.driver ?? "worker")
  try {
    return await runtime.runPromise(Effect.gen(function* () {
      const sessions = yield* SessionStore.SessionStore
      const store = yield* TurnStore.TurnStore
      const journal = yield* TurnJournal
      const writers = []
      for (let t = 0; t < turns; t++) {
        const sessionId = `s-${t}`
        const runId = Ids.unsafeMake.runId(`run-${t}`)
        yield* sessions.create({ sessionId, agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
        yield* store.create({ turnId: `t-${t}`, sessionId, runId, input: MessageInput.text("bench") })
        writers.push({ runId, writer: yield* journal.open(`t-${t}`, 1) })
      }
      const commitsBefore = (yield* Metric.value(journalTransactionWrites)).count
      const lockHolder = options.lockHolder
      const holder = lockHolder === undefined ? undefined : yield* Effect.acquireRelease(
        Effect.promise(() => startWriteLockHolder(file, lockHolder)),
        (h) => Effect.promise(() => h.stop())
      )
      const loop = monitorEventLoopDelay({ resolution: 1 })
      loop.enable()
      // The histogram records a delay only from its second tick on (the first one sets its start): a stall before
      // that tick is not counted. The holder already holds the lock, so the run still meets it (80 ms hold).
      if (holder !== undefined) yield* Effect.sleep("4 millis")
      const cpu0 = cpuNow()
      const sys0 = sysNow()
      const t0 = performance.now()
      yield* Effect.forEach(writers, ({ runId, writer }) =>
        Effect.gen(function* () {
          for (let i = 1; i <= perTurn; i++) yield* writer.record(deltaOf(runId, i))
        }), { concurrency: "unbounded", discard: true })
      const wallMs = performance.now() - t0
      const cpuUs = cpuNow() - cpu0
      const sysUs = sysNow() - sys0
      loop.disable()
      const holds = holder === undefined ? undefined : yield* Effect.promise(() => holder.stop())
      const commits = (yield* Metric.value(journalTransactionWrites)).count - commitsBefore
      const ms = (ns: number) => ns / 1e6
      const result = { events: turns * perTurn, wallMs, cpuUs, sysUs, commits, loop: { p99Ms: ms(loop.percentile(99)), maxMs: ms(loop.max) } }
      return holds === undefined ? result : { ...result, holds }
    }).pipe(Effect.scoped))
  } finally {
    await runtime.dispose()
  }
}

/** Raw node:sqlite: the same rows in `commits` transactions, WAL + synchronous=FULL, the journal's schema. */
const rawRun = (dir: string, name: string, turns: number, perTurn: number, commits: number): RunResult => {
  const db = new DatabaseSync(join(dir, `${name}.db`))
  try {
    db.exec("PRAGMA journal_mode = WAL")
    db.exec("PRAGMA synchronous = FULL")
    db.exec(`CREATE TABLE turn_events (turn_id TEXT NOT NULL, seq INTEGER NOT NULL, attempt INTEGER NOT NULL,
      kind TEXT NOT NULL, type TEXT NOT NULL, body_json TEXT NOT NULL, received_at_ms BIGINT NOT NULL,
      PRIMARY KEY (turn_id, seq))`)
    const rows: Array<readonly [string, number, string]> = []
    for (let i = 1; i <= perTurn; i++) {
      for (let t = 0; t < turns; t++) rows.push([`t-${t}`, i, encodeFrame(deltaEvent(Ids.unsafeMake.runId(`run-${t}`), i))])
    }
    const insert = db.prepare(
      "INSERT INTO turn_events (turn_id, seq, attempt, kind, type, body_json, received_at_ms) VALUES (?, ?, 1, 'frame', 'delta', ?, ?)"
    )
    const cpu0 = cpuNow()
    const sys0 = sysNow()
    const t0 = performance.now()
    const n = Math.max(1, commits)
    for (let c = 0; c < n; c++) {
      const from = Math.floor((c * rows.length) / n)
      const to = Math.floor(((c + 1) * rows.length) / n)
      db.exec("BEGIN IMMEDIATE")
      const at = Date.now()
      for (let r = from; r < to; r++) insert.run(rows[r]![0], rows[r]![1], rows[r]![2], at)
      db.exec("COMMIT")
    }
    const wallMs = performance.now() - t0
    return { events: rows.length, wallMs, cpuUs: cpuNow() - cpu0, sysUs: sysNow() - sys0, commits: n, loop: { p99Ms: NaN, maxMs: NaN } }
  } finally {
    db.close()
  }
}

/** The event loop of this process with nothing running, for `ms` (the machine's own scheduling noise). */
const idleLoop = async (ms: number): Promise<RunResult["loop"]> => {
  const loop = monitorEventLoopDelay({ resolution: 1 })
  loop.enable()
  await new Promise((resolve) => setTimeout(resolve, ms))
  loop.disable()
  return { p99Ms: loop.percentile(99) / 1e6, maxMs: loop.max / 1e6 }
}

/**
 * The event-loop runs' condition: another process holds the database's write lock for 80 ms every 250 ms (a
 * second connection's transaction: a credential created from the CLI, a backup), so the store's commits wait for
 * it in SQLite's busy handler, on the event loop with the in-thread store, on the worker thread with the worker.
 */
const LockHolds: LockHolderOptions = { holdMs: 80, gapMs: 170 }

const median = (xs: ReadonlyArray<number>): number => percentile(xs, 50)
const perSecond = (r: RunResult) => r.events / (r.wallMs / 1000)
const cpuPerEvent = (r: RunResult) => r.cpuUs / r.events

export const durableSuite: Suite = {
  name: "durable",
  describe: "journal facts of concurrent Turns on a file-backed SQLite store, every commit fsynced, vs raw node:sqlite",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const p = ctx.quick
      ? { rounds: 2, turns: 64, perTurn: 30, wideTurns: 256, widePerTurn: 8, controlPerTurn: 3, loopTurns: 16, loopPerTurn: 30 }
      : { rounds: 7, turns: 64, perTurn: 300, wideTurns: 256, widePerTurn: 75, controlPerTurn: 10, loopTurns: 16, loopPerTurn: 300 }
    const dir = mkdtempSync(join(benchTempDir(), "durable-"))
    const group: Array<RunResult> = []
    const raw: Array<RunResult> = []
    const wide: Array<RunResult> = []
    const wideRaw: Array<RunResult> = []
    const control: Array<RunResult> = []
    const inThread: Array<RunResult> = []
    const loopWorker: Array<RunResult> = []
    const loopInThread: Array<RunResult> = []
    const loopIdle: Array<RunResult["loop"]> = []
    try {
      // Warm-up (module init, statement cache, JIT) on a small run, not recorded.
      await durableRun(dir, "warmup", 8, 20)
      await durableRun(dir, "warmup-inthread", 8, 20, { driver: "in-thread" })
      for (let round = 0; round < p.rounds; round++) {
        const g = await durableRun(dir, `group-${round}`, p.turns, p.perTurn)
        const r = rawRun(dir, `raw-${round}`, p.turns, p.perTurn, g.commits)
        // More Turns in flight than one batch of 64 can take: batches grow to the default maxBatch (256).
        const w = await durableRun(dir, `wide-${round}`, p.wideTurns, p.widePerTurn)
        const wr = rawRun(dir, `wide-raw-${round}`, p.wideTurns, p.widePerTurn, w.commits)
        wide.push(w)
        wideRaw.push(wr)
        const c = await durableRun(dir, `control-${round}`, p.turns, p.controlPerTurn, { maxBatch: 1 })
        const t = await durableRun(dir, `inthread-${round}`, p.turns, p.perTurn, { driver: "in-thread" })
        const lw = await durableRun(dir, `loop-worker-${round}`, p.loopTurns, p.loopPerTurn, { lockHolder: LockHolds })
        const lt = await durableRun(dir, `loop-inthread-${round}`, p.loopTurns, p.loopPerTurn, { driver: "in-thread", lockHolder: LockHolds })
        const li = await idleLoop(lw.wallMs)
        group.push(g)
        raw.push(r)
        control.push(c)
        inThread.push(t)
        loopWorker.push(lw)
        loopInThread.push(lt)
        loopIdle.push(li)
        ctx.log(
          `durable round ${round + 1}/${p.rounds}: ${formatNumber(perSecond(g))} events/s (${g.commits} commits, ` +
            `${formatNumber(cpuPerEvent(g))} µs CPU/event, ${formatNumber(g.sysUs / g.events)} of it system); ` +
            `raw ${formatNumber(perSecond(r))}/s (${formatNumber(cpuPerEvent(r))} µs, ${formatNumber(r.sysUs / r.events)} system); ` +
            `${p.wideTurns} Turns ${formatNumber(perSecond(w))}/s (${w.commits} commits, ${formatNumber(cpuPerEvent(w))} µs), ` +
            `raw ${formatNumber(perSecond(wr))}/s; ` +
            `one commit per fact ${formatNumber(perSecond(c))}/s; in-thread store ${formatNumber(perSecond(t))}/s ` +
            `(${formatNumber(cpuPerEvent(t))} µs); event loop under ${p.loopTurns} Turns and another process's write ` +
            `locks (${lw.holds?.holds ?? 0} / ${lt.holds?.holds ?? 0} holds of ${LockHolds.holdMs} ms) p99/max: worker ` +
            `${formatNumber(lw.loop.p99Ms)}/${formatNumber(lw.loop.maxMs)} ms, in-thread ` +
            `${formatNumber(lt.loop.p99Ms)}/${formatNumber(lt.loop.maxMs)} ms, idle ` +
            `${formatNumber(li.p99Ms)}/${formatNumber(li.maxMs)} ms`
        )
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const rowsPerCommit = group.map((g) => g.events / Math.max(1, g.commits))
    // The judged figure (issue 18, "≥ 50k durable events/s per core"): events per CPU-second of the Core process
    // (worker thread included), i.e. 1e6 / CPU µs per event. The wall-clock rate is reported beside it, not judged:
    // on this VM it is bounded by the disk's fsync (one per commit), not by the code.
    const perCpuSecond = (r: RunResult) => r.events / (r.cpuUs / 1e6)
    const figures: Array<Figure> = [
      figure({
        suite: "durable",
        name: `durable events per CPU-second of Core ("per core"), ${p.turns} Turns, every commit fsynced`,
        unit: "events/CPU-s",
        samples: group.map(perCpuSecond),
        baseline: { name: "raw node:sqlite, same rows, same commits, synchronous=FULL", samples: raw.map(perCpuSecond) },
        target: { on: "value", op: ">=", value: 50_000 },
        control: { name: "one transaction per fact (no group commit)", samples: control.map(perCpuSecond) },
        note: `group commit: ${formatNumber(Math.min(...rowsPerCommit))}–${formatNumber(Math.max(...rowsPerCommit))} facts per commit; ` +
          "fsyncs equal to commits on both sides (WAL, synchronous=FULL); CPU = process.cpuUsage over the run"
      }),
      figure({
        suite: "durable",
        name: `durable events/s (wall clock, not judged: bounded by fsync), ${p.turns} Turns`,
        unit: "events/s",
        samples: group.map(perSecond),
        baseline: { name: "raw node:sqlite, same rows, same commits, synchronous=FULL", samples: raw.map(perSecond) },
        note: `one commit per fact (the control): ${formatNumber(median(control.map(perSecond)))} events/s`
      }),
      figure({
        suite: "durable",
        name: "CPU per durable event (Core process)",
        unit: "µs",
        samples: group.map(cpuPerEvent),
        baseline: { name: "raw node:sqlite, same rows, same commits", samples: raw.map(cpuPerEvent) },
        target: { on: "value", op: "<=", value: 20 },
        control: { name: "one transaction per fact (no group commit)", samples: control.map(cpuPerEvent) },
        note: `system (kernel) part, median: Core ${formatNumber(median(group.map((g) => g.sysUs / g.events)))} µs, ` +
          `raw ${formatNumber(median(raw.map((r) => r.sysUs / r.events)))} µs`
      })
    ]
    const wideRows = wide.map((g) => g.events / Math.max(1, g.commits))
    figures.push(
      figure({
        suite: "durable",
        name: `durable events per CPU-second of Core, ${p.wideTurns} Turns in flight, every commit fsynced`,
        unit: "events/CPU-s",
        samples: wide.map(perCpuSecond),
        baseline: { name: "raw node:sqlite, same rows, same commits, synchronous=FULL", samples: wideRaw.map(perCpuSecond) },
        target: { on: "value", op: ">=", value: 50_000 },
        control: { name: "one transaction per fact (no group commit)", samples: control.map(perCpuSecond) },
        note: `group commit: ${formatNumber(Math.min(...wideRows))}–${formatNumber(Math.max(...wideRows))} facts per commit ` +
          `(maxBatch 256); the acknowledgement still waits for its batch's commit; wall clock ` +
          `${formatNumber(median(wide.map(perSecond)))} events/s (raw ${formatNumber(median(wideRaw.map(perSecond)))}), not judged`
      }),
      figure({
        suite: "durable",
        name: `CPU per durable event, ${p.wideTurns} Turns in flight`,
        unit: "µs",
        samples: wide.map(cpuPerEvent),
        baseline: { name: "raw node:sqlite, same rows, same commits", samples: wideRaw.map(cpuPerEvent) },
        target: { on: "value", op: "<=", value: 20 },
        control: { name: "one transaction per fact (no group commit)", samples: control.map(cpuPerEvent) }
      }),
      figure({
        suite: "durable",
        name: `durable events/s, worker store vs in-thread store (${p.turns} Turns)`,
        unit: "events/s",
        samples: group.map(perSecond),
        baseline: { name: "the same path with the in-thread store (before)", samples: inThread.map(perSecond) },
        note: `CPU per event (whole process): worker store ${formatNumber(median(group.map(cpuPerEvent)))} µs, ` +
          `in-thread ${formatNumber(median(inThread.map(cpuPerEvent)))} µs`
      }),
      figure({
        suite: "durable",
        name: `event-loop delay p99, ${p.loopTurns} Turns journaling, another process taking the write lock`,
        unit: "ms",
        samples: loopWorker.map((r) => r.loop.p99Ms),
        baseline: { name: "idle event loop, same process, as long as the run", samples: loopIdle.map((l) => l.p99Ms) },
        target: { on: "value", op: "<=", value: 2 },
        control: { name: "in-thread store (statements on the event loop)", samples: loopInThread.map((r) => r.loop.p99Ms) },
        note: `monitorEventLoopDelay, 1 ms resolution, over each run; another process holds the write lock ` +
          `${LockHolds.holdMs} ms every ${LockHolds.holdMs + LockHolds.gapMs} ms on both sides (median holds per run: worker ` +
          `${formatNumber(median(loopWorker.map((r) => r.holds?.holds ?? 0)))}, in-thread ` +
          `${formatNumber(median(loopInThread.map((r) => r.holds?.holds ?? 0)))}); the worker store's statements wait in its ` +
          "worker thread, the in-thread store's on the event loop"
      }),
      figure({
        suite: "durable",
        name: `event-loop delay max, ${p.loopTurns} Turns journaling, another process taking the write lock`,
        unit: "ms",
        samples: loopWorker.map((r) => r.loop.maxMs),
        baseline: { name: "idle event loop, same process, as long as the run", samples: loopIdle.map((l) => l.maxMs) },
        target: { on: "value", op: "<=", value: 20 },
        control: { name: "in-thread store (statements on the event loop)", samples: loopInThread.map((r) => r.loop.maxMs) },
        note: `durable events/s in these runs: worker ${formatNumber(median(loopWorker.map(perSecond)))}, ` +
          `in-thread ${formatNumber(median(loopInThread.map(perSecond)))}`
      })
    )
    const notes = [
      `durable: ${p.turns} Turns × ${p.perTurn} deltas per round through JournalWriter.record (encode, group commit, publish); ` +
        `${p.rounds} interleaved rounds; the control journals ${p.controlPerTurn} deltas per Turn with one commit each; ` +
        `${p.wideTurns} Turns × ${p.widePerTurn} deltas: more Turns in flight than one batch of 64, batches up to 256`
    ]
    return { figures, notes }
  }
}
