/**
 * Ground truth about native state, kept outside the Runtime: a wrapper around the real `scripted` Harness
 * records every preparation, Turn start, settlement and close the Runtime makes, so the simulator can check the
 * ownership invariants against what really happened natively, not against what the Runtime says.
 *
 * The wrapper changes no behaviour in the correct build. The negative control (`broken: "freeOnCancelTimeout"`)
 * is the deliberately broken build the issue names: once a Turn was asked to cancel, a settlement waiter that
 * times out after 5 s reports a reusable settlement although the native Turn is still running, so the Runtime
 * hands the Executor back as if it were free. The ledger then sees the next Turn start on an Executor whose
 * native Turn never settled.
 */
import { Deferred, Duration, Effect, Exit } from "effect"
import type { Executor, Harness, Settlement, Turn } from "../../src/runtime/harness/Harness.js"

/**
 * The deliberately broken builds (negative controls): `freeOnCancelTimeout` (below) and
 * `replayWriteAfterReconnect` (World.ts: Core sends the last `workspace_write` frame of an earlier connection
 * again on the next one, as a Core that replays a write after a reconnect would).
 */
export type Broken = "none" | "freeOnCancelTimeout" | "replayWriteAfterReconnect"

export const brokenBuilds: ReadonlyArray<Broken> = ["freeOnCancelTimeout", "replayWriteAfterReconnect"]

interface NativeExecutor {
  readonly key: string
  closed: boolean
  closing: number
  activeRun: string | undefined
  /** The active Run was asked to cancel natively (a native side may ignore it: the Runtime must keep waiting). */
  cancelAsked: boolean
}

export interface NativeLedger {
  readonly violations: Array<string>
  /** Preparations in progress, per daemon process. */
  readonly preparing: Map<number, number>
  readonly executors: Map<string, NativeExecutor>
  readonly counts: { prepares: number; turns: number; closes: number; closeFailures: number }
}

export const makeLedger = (): NativeLedger => ({
  violations: [],
  preparing: new Map(),
  executors: new Map(),
  counts: { prepares: 0, turns: 0, closes: 0, closeFailures: 0 }
})

/** Executors of process `proc` that count against the active bound: preparing, running a Turn, or closing. */
export const activeCount = (ledger: NativeLedger, proc: number): number => {
  let n = ledger.preparing.get(proc) ?? 0
  for (const e of ledger.executors.values()) {
    if (!e.key.startsWith(`${proc}/`) || e.closed) continue
    if (e.activeRun !== undefined || e.closing > 0) n++
  }
  return n
}

/**
 * Executors of process `proc` still busy natively for a reason other than a native side ignoring a cancel:
 * preparing, running a Turn nobody asked to stop, or closing.
 */
export const stuckCount = (ledger: NativeLedger, proc: number): number => {
  let n = ledger.preparing.get(proc) ?? 0
  for (const e of ledger.executors.values()) {
    if (!e.key.startsWith(`${proc}/`) || e.closed) continue
    if ((e.activeRun !== undefined && !e.cancelAsked) || e.closing > 0) n++
  }
  return n
}

/** Executors of process `proc` still natively alive (not confirmed closed). */
export const aliveExecutors = (ledger: NativeLedger, proc: number): ReadonlyArray<string> =>
  [...ledger.executors.values()].filter((e) => e.key.startsWith(`${proc}/`) && !e.closed).map((e) => e.key)

export const nativeExecutor = (ledger: NativeLedger, proc: number, executorId: string) =>
  ledger.executors.get(`${proc}/${executorId}`)

const fakeSettlement = (turn: Turn): Effect.Effect<Settlement> =>
  Effect.map(turn.cancellationOutcome, (done) => ({ outcome: "cancelled", done, reusable: true }) satisfies Settlement)

export const observe = (inner: Harness, ledger: NativeLedger, proc: number, broken: Broken): Harness => {
  const wrapTurn = (entry: NativeExecutor, runId: string, turn: Turn): Turn => {
    const cancelAsked = Deferred.makeUnsafe<void>()
    const settled = (s: Settlement) =>
      Effect.sync(() => {
        if (entry.activeRun === runId) entry.activeRun = undefined
        return s
      })
    const real = Effect.flatMap(turn.awaitSettlement, settled)
    // The broken waiter: 5 s after the cancel request it gives up and reports the Executor free.
    const lying = Effect.gen(function* () {
      yield* Deferred.await(cancelAsked)
      yield* Effect.sleep(Duration.seconds(5))
      return yield* fakeSettlement(turn)
    })
    return {
      ...turn,
      cancel: Effect.suspend(() => {
        Deferred.doneUnsafe(cancelAsked, Exit.void)
        if (entry.activeRun === runId) entry.cancelAsked = true
        return turn.cancel
      }),
      awaitSettlement: broken === "freeOnCancelTimeout" ? Effect.raceFirst(real, lying) : real
    }
  }

  const wrapExecutor = (entry: NativeExecutor, executor: Executor): Executor => ({
    ...executor,
    startTurn: (runId, input, sink) =>
      Effect.gen(function* () {
        if (entry.closed || entry.closing > 0) {
          ledger.violations.push(`ownership: Turn ${runId} started on Executor ${entry.key} after its close began`)
        } else if (entry.activeRun !== undefined) {
          ledger.violations.push(
            `ownership: Turn ${runId} started on Executor ${entry.key} while its Turn ${entry.activeRun} had not settled natively`
          )
        }
        const turn = yield* executor.startTurn(runId, input, sink)
        ledger.counts.turns++
        entry.activeRun = runId
        entry.cancelAsked = false
        return wrapTurn(entry, runId, turn)
      }),
    close: Effect.suspend(() => {
      if (entry.closed) return executor.close
      entry.closing++
      return executor.close.pipe(
        Effect.onExit((exit) =>
          Effect.sync(() => {
            entry.closing--
            if (Exit.isSuccess(exit)) {
              if (!entry.closed) ledger.counts.closes++
              entry.closed = true
              entry.activeRun = undefined
            } else ledger.counts.closeFailures++
          })
        )
      )
    })
  })

  return {
    declaration: inner.declaration,
    prepare: (request) =>
      Effect.gen(function* () {
        ledger.counts.prepares++
        ledger.preparing.set(proc, (ledger.preparing.get(proc) ?? 0) + 1)
        const key = `${proc}/${request.executorId}`
        const executor = yield* inner.prepare(request).pipe(
          Effect.ensuring(Effect.sync(() => ledger.preparing.set(proc, (ledger.preparing.get(proc) ?? 1) - 1)))
        )
        const entry: NativeExecutor = { key, closed: false, closing: 0, activeRun: undefined, cancelAsked: false }
        ledger.executors.set(key, entry)
        return wrapExecutor(entry, executor)
      })
  }
}
