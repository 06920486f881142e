/**
 * The writes of one connection that were handed to its socket and whose callback has not fired yet
 * (`WebSocketTransport`), oldest first: writes complete in call order. Each has its deadline on the Effect clock
 * (`FrameWriteDeadline`, 10 s) and what to do when it is settled. One watchdog fiber per connection enforces the
 * deadlines, so a write costs no fiber, timer or race of its own. A write that fails or misses its deadline goes to
 * `failed` first (the socket is unusable: the transport destroys it), then to whoever waits for it.
 *
 * A wait may have a budget (`Transport.sendWithin`, issue 18): it ends as `"late"` once the budget passed without
 * the write completing. The frame stays handed over, and its write deadline still applies. The budgets of one
 * length are a `DueOrder` (budgets of one length armed as time goes on fall due in the order they were armed). It is
 * made on the length's first use, in the connection's scope, so a budget costs no fiber, timer or race either
 * (`DueOrder.arm`: one its order does not take sleeps on a fiber of its own).
 */
import { Clock, Duration, Effect, Latch, Scope } from "effect"
import * as DueOrder from "../../../proto/DueOrder.js"
import { TransportClosed } from "../Transport.js"

/** Hands frames to the socket; `done` fires once, without an error when their write completed locally. */
export type Write = (done: (error?: Error) => void) => void

/** What a wait established: the write completed locally, or the wait's budget passed first. */
export type WaitOutcome = "written" | "late"

export interface PendingWrites {
  /**
   * Hands frames to the socket now, without waiting; `resume` runs once when their write is settled: with no failure
   * when it completed, else after `failed`.
   */
  readonly handOver: (write: Write, resume: (failure: TransportClosed | undefined) => void) => void
  /**
   * Hands frames to the socket and waits for their write: `"written"` proves it completed locally. Fails with
   * `TransportClosed` (`write_failed`) when it failed or missed its deadline. With `budget`: `"late"` once that long
   * passed first. Interrupted while waiting: the write stays handed over, and its deadline no longer applies.
   */
  readonly wait: (write: Write, budget?: Duration.Duration) => Effect.Effect<WaitOutcome, TransportClosed>
  /** The socket is gone: every write still pending failed (its frames may or may not have left). */
  readonly failAll: () => void
}

interface PendingWrite {
  readonly deadline: number
  readonly resume: (failure: TransportClosed | undefined) => void
  settled: boolean
}

/** A wait's budget as a `DueOrder` entry. */
interface Budget {
  readonly expire: () => void
}

/**
 * At most this many budget lengths get a `DueOrder` per connection (the lengths are the protocol's constants); a
 * budget of any other length is armed on the first one made (`arm`: a sleep of its own).
 */
const maxBudgetLengths = 8

const writeFailed = () => new TransportClosed({ reason: "write_failed" })
const writtenExit = Effect.succeed<WaitOutcome>("written")
const lateExit = Effect.succeed<WaitOutcome>("late")

/** The pending writes of a connection; the watchdog and the budgets live in the current scope. */
export const make = (
  writeDeadline: Duration.Duration,
  failed: (failure: TransportClosed) => void
): Effect.Effect<PendingWrites, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const scope = yield* Effect.scope
    const deadlineMs = Duration.toMillis(writeDeadline)
    const pending: Array<PendingWrite> = []
    const writing = Latch.makeUnsafe(false)
    const budgets = new Map<number, DueOrder.DueOrder<Budget>>()

    const settle = (entry: PendingWrite, failure: TransportClosed | undefined) => {
      if (entry.settled) return
      entry.settled = true
      const at = pending.indexOf(entry)
      if (at >= 0) pending.splice(at, 1)
      if (failure !== undefined) failed(failure)
      entry.resume(failure)
    }

    const push = (write: Write, resume: PendingWrite["resume"]): PendingWrite => {
      const entry: PendingWrite = { deadline: clock.currentTimeMillisUnsafe() + deadlineMs, resume, settled: false }
      pending.push(entry)
      if (pending.length === 1) writing.openUnsafe()
      write((error) => settle(entry, error === undefined ? undefined : writeFailed()))
      return entry
    }

    /**
     * The connection's write deadlines: sleeps until the oldest pending write's deadline and fails it if it is still
     * pending then; waits while nothing is pending. While writes keep completing it wakes about once per deadline,
     * whatever the number of frames.
     */
    const watchdog: Effect.Effect<never> = Effect.gen(function* () {
      while (true) {
        if (pending.length === 0) {
          writing.closeUnsafe()
          yield* writing.await
          continue
        }
        const oldest = pending[0]!
        const wait = oldest.deadline - clock.currentTimeMillisUnsafe()
        if (wait > 0) {
          yield* Effect.sleep(Duration.millis(wait))
          continue
        }
        settle(oldest, writeFailed())
      }
    })
    yield* Effect.forkScoped(watchdog)

    /** The `DueOrder` of budgets `ms` long, made on first use (past `maxBudgetLengths` lengths: the first one). */
    const budgetOrder = (ms: number): Effect.Effect<DueOrder.DueOrder<Budget>> =>
      Effect.suspend(() => {
        const known = budgets.get(ms) ?? (budgets.size >= maxBudgetLengths ? budgets.values().next().value : undefined)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.map(Scope.provide(DueOrder.make<Budget>((budget) => budget.expire()), scope), (made) => {
          const first = budgets.get(ms) ?? made
          budgets.set(ms, first)
          return first
        })
      })

    const plainWait = (write: Write) =>
      Effect.callback<WaitOutcome, TransportClosed>((resume) => {
        const entry = push(write, (failure) => resume(failure === undefined ? writtenExit : Effect.fail(failure)))
        return Effect.sync(() => settle(entry, undefined))
      })

    const budgetedWait = (write: Write, budget: Duration.Duration) => {
      const ms = Duration.toMillis(budget)
      return Effect.flatMap(budgetOrder(ms), (order) =>
        Effect.callback<WaitOutcome, TransportClosed>((resume) => {
          let waiting = true
          const budgetEntry: Budget = {
            expire: () => {
              if (!waiting) return
              waiting = false
              resume(lateExit)
            }
          }
          const entry = push(write, (failure) => {
            if (!waiting) return
            waiting = false
            order.remove(budgetEntry)
            resume(failure === undefined ? writtenExit : Effect.fail(failure))
          })
          if (waiting) order.arm(budgetEntry, clock.currentTimeMillisUnsafe() + ms)
          return Effect.sync(() => {
            waiting = false
            order.remove(budgetEntry)
            settle(entry, undefined)
          })
        }))
    }

    return {
      handOver: (write, resume) => {
        push(write, resume)
      },
      wait: (write, budget) => (budget === undefined ? plainWait(write) : budgetedWait(write, budget)),
      failAll: () => {
        for (const entry of [...pending]) settle(entry, writeFailed())
      }
    }
  })
