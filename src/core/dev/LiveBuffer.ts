/**
 * A bounded buffer between a live source that must never wait (a Turn's journal hub) and one reader that may
 * (an operator's event stream). The source is drained at its own pace from the moment the buffer is made, so the
 * Turn and its journal never wait for, or grow with, a reader; a reader that falls more than `maxWeight` behind
 * is dropped with `FollowerLagging` instead of holding memory without bound (issue #17: "SSE clients that never
 * read are dropped, the Turn is unaffected"). A dropped reader may follow again from the seq it last saw.
 */
import { type Cause, Data, Effect, Queue, type Scope, Stream } from "effect"

/** The reader fell more than `maxWeight` behind the live source and was dropped (nothing upstream was affected). */
export class FollowerLagging extends Data.TaggedError("FollowerLagging")<{ readonly maxWeight: number }> {}

/**
 * Starts draining `source` into a buffer now (in the current scope) and returns the reader's side. Every item
 * reaches the reader in order while the buffered weight stays at or below `maxWeight`; past it the reader's stream
 * fails with `FollowerLagging` (after the items already buffered) and draining stops; `onLagging` runs at that
 * moment, from the draining side (a reader blocked on a full socket would never pull the failure).
 */
export const make = <A, E>(
  source: Stream.Stream<A, E>,
  weigh: (item: A) => number,
  maxWeight: number,
  onLagging: Effect.Effect<void> = Effect.void
): Effect.Effect<Stream.Stream<A, E | FollowerLagging>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const buffer = yield* Queue.unbounded<A, E | FollowerLagging | Cause.Done>()
    // The weight buffered and not yet pulled by the reader. Both sides run on this process's one thread and
    // touch it only in synchronous steps, so a plain variable is enough (issue 18: no Effect per item and side).
    let weight = 0
    // Made only when the reader falls behind (an error captures a stack: not a cost of every follower).
    let lagging: FollowerLagging | undefined
    yield* source.pipe(
      // Whatever the source has ready is weighed and buffered in one step.
      Stream.runForEachArray((items) => {
        for (let i = 0; i < items.length; i++) {
          weight += weigh(items[i]!)
          if (weight > maxWeight) {
            if (i > 0) Queue.offerAllUnsafe(buffer, items.slice(0, i))
            return Effect.fail(lagging ??= new FollowerLagging({ maxWeight }))
          }
        }
        Queue.offerAllUnsafe(buffer, items)
        return Effect.void
      }),
      Effect.matchCauseEffect({
        onSuccess: () => Queue.end(buffer),
        onFailure: (cause) =>
          lagging !== undefined && cause.reasons.some((reason) => reason._tag === "Fail" && reason.error === lagging)
            ? Effect.andThen(onLagging, Queue.fail(buffer, lagging))
            : Queue.failCause(buffer, cause)
      }),
      Effect.forkScoped
    )
    return Stream.fromQueue(buffer).pipe(Stream.mapArray((items) => {
      for (const item of items) weight -= weigh(item)
      return items
    }))
  })
