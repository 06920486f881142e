/**
 * Durable store writes of a Turn's runner (docs/dev-core.md "store outages"): a write is never dropped. A
 * failed write is retried on a `Schedule` (the first retry after `storeRetryDelay`, 100 ms, the delay doubling
 * up to `maxStoreRetryDelay`, 5 s); only shutdown interrupts it. When one write keeps failing for
 * `journalStallBudget` (30 s), an error is logged with the Turn id and `onStall` runs (the runner ends the
 * Turn's observation with `journal_unavailable`); the retries go on.
 */
import { type Cause, Duration, Effect, Schedule } from "effect"
import { StoreFailed } from "./StoreErrors.js"

export interface DurableOptions {
  readonly storeRetryDelay?: Duration.Input
  readonly maxStoreRetryDelay?: Duration.Input
  readonly journalStallBudget?: Duration.Input
}

/** The Turn a write belongs to (for its log lines). */
export interface WriteOwner {
  readonly turnId: string
  readonly runId: string
}

/** Builds `durable(owner, operation, write)`: the write, retried until it succeeds. */
export const makeDurable = <O extends WriteOwner>(options: DurableOptions, onStall: (owner: O) => Effect.Effect<void>) => {
  const firstRetry = Duration.fromInputUnsafe(options.storeRetryDelay ?? Duration.millis(100))
  /** The retries after the first one: the delay keeps doubling from where the first wait left off, capped. */
  const laterRetries = Schedule.min([
    Schedule.exponential(Duration.times(firstRetry, 2), 2),
    Schedule.spaced(Duration.fromInputUnsafe(options.maxStoreRetryDelay ?? Duration.seconds(5)))
  ])
  const stallBudget = Duration.fromInputUnsafe(options.journalStallBudget ?? Duration.seconds(30))

  /** A write of this Turn kept failing for the stall budget: make it visible and let the owner react. */
  const stalled = (owner: O, operation: string) =>
    Effect.logError("turn record not persisted: the store stays unavailable; observation of the turn ends").pipe(
      Effect.annotateLogs({ turn_id: owner.turnId, run_id: owner.runId, operation, observation: "journal_unavailable" }),
      Effect.andThen(onStall(owner))
    )

  // Any other failure of the write (a fenced write's `LeaseLost`) is not retried: it ends the write at once.
  return <A, E = never>(owner: O, operation: string, write: Effect.Effect<A, StoreFailed | E>): Effect.Effect<A, E> =>
    Effect.catch(write, (first) =>
      !(first instanceof StoreFailed) ? Effect.fail(first) : Effect.scoped(Effect.gen(function* () {
        yield* Effect.logWarning("turn record not persisted yet; retrying").pipe(
          Effect.annotateLogs({ turn_id: owner.turnId, operation, store_operation: first.operation })
        )
        yield* Effect.forkScoped(Effect.sleep(stallBudget).pipe(Effect.andThen(stalled(owner, operation))))
        yield* Effect.sleep(firstRetry)
        // The schedule never ends: only a failure other than `StoreFailed` leaves the retries.
        const result = yield* Effect.retry(write, { schedule: laterRetries, while: (e) => e instanceof StoreFailed }).pipe(
          Effect.catch((e) => e instanceof StoreFailed ? Effect.die(e) : Effect.fail(e))
        )
        yield* Effect.logInfo("turn record persisted after retrying").pipe(Effect.annotateLogs({ turn_id: owner.turnId, operation }))
        return result
      })))
}

/** What kind of failure a cause holds, for a log line: an error's tag or a defect's class, never its text. */
export const failureKind = (cause: Cause.Cause<unknown>): string => {
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail") {
      const error = reason.error as { readonly _tag?: unknown }
      return typeof error?._tag === "string" ? error._tag : "failure"
    }
    if (reason._tag === "Die") {
      const defect = reason.defect
      return defect instanceof Error ? defect.constructor.name : "defect"
    }
  }
  return "interrupted"
}
