/**
 * Receipts of Runs that ended, kept for a bounded time (protocol "Active input receipts"; issue #17): a Core
 * that lost the final receipt of an input accepted just before `done` resends it, and must get that receipt,
 * not `run_inactive` (which it would read as "not applied"). A family hands over a Run's final receipts when
 * the Run stops; they answer repeats of the same ids until `retention` has passed since the Run ended (then
 * they are gone: a repeat is `run_inactive` again). At most `maxRuns` ended Runs are kept per connection, the
 * longest-ended dropped first; each Run holds at most its family's own per-Run bound of receipts, and only a
 * digest of each input, so memory is bounded. Time is the Clock's (TestClock in tests); no fiber, no timer.
 */
import { Clock, Duration, Effect, Option } from "effect"
import type { RunId } from "../proto/Ids.js"

/** One retained receipt: the digest of what was receipted and the receipt itself. */
export interface RetainedReceipt<R> {
  readonly fingerprint: string
  readonly receipt: R
}

export interface EndedRunReceipts<R> {
  /** The Run ended: keep these receipts (replacing any kept for an earlier Run with the same id). */
  readonly retain: (runId: RunId, receipts: ReadonlyMap<string, RetainedReceipt<R>>) => Effect.Effect<void>
  /** The receipt kept for `key` of the ended Run `runId`, while its retention lasts. */
  readonly lookup: (runId: RunId, key: string) => Effect.Effect<Option.Option<RetainedReceipt<R>>>
  /** Ended Runs currently kept (tests and status). */
  readonly size: Effect.Effect<number>
}

export const makeEndedRunReceipts = <R>(retention: Duration.Duration, maxRuns: number): EndedRunReceipts<R> => {
  const retentionMs = Duration.toMillis(retention)
  /** Insertion order is end order, so expiry deadlines increase along the map. */
  const runs = new Map<RunId, { readonly until: number; readonly receipts: ReadonlyMap<string, RetainedReceipt<R>> }>()
  const prune = (now: number) => {
    for (const [id, kept] of runs) {
      if (kept.until > now) break
      runs.delete(id)
    }
  }
  return {
    retain: (runId, receipts) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        prune(now)
        runs.delete(runId)
        if (receipts.size === 0 || maxRuns <= 0) return
        runs.set(runId, { until: now + retentionMs, receipts })
        while (runs.size > maxRuns) {
          const oldest = runs.keys().next()
          if (oldest.done === true) break
          runs.delete(oldest.value)
        }
      }),
    lookup: (runId, key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        prune(now)
        return Option.fromNullishOr(runs.get(runId)?.receipts.get(key))
      }),
    size: Effect.sync(() => runs.size)
  }
}
