/**
 * A bounded buffer between a live source that must never wait (a Turn's journal) and one reader that may (an
 * operator's event stream). The source hands items to the buffer synchronously (`makeSink`: its `offer` is a plain
 * call from the publisher's step, issue 18: no fiber between the publisher and the reader's buffer) or is drained
 * from the moment the buffer is made (`make`), so the Turn and its journal never wait for, or grow with, a reader;
 * a reader that falls more than `maxWeight` behind is dropped with `FollowerLagging` instead of holding memory
 * without bound (issue #17: "SSE clients that never read are dropped, the Turn is unaffected"). A dropped reader
 * may follow again from the seq it last saw.
 */
import { Cause, Data, Effect, Queue, type Scope, Stream } from "effect"

/** The reader fell more than `maxWeight` behind the live source and was dropped (nothing upstream was affected). */
export class FollowerLagging extends Data.TaggedError("FollowerLagging")<{ readonly maxWeight: number }> {}

/** The publisher's side of a buffer: never waits, never fails. */
export interface Sink<A> {
  /** Buffers `item` (and ends the reader's stream after it when it is the last); ignored once ended or dropped. */
  readonly offer: (item: A) => void
  /** Ends the reader's stream after what is buffered (the source ended). */
  readonly end: () => void
  /** Fails the reader's stream after what is buffered (the source failed). */
  readonly failCause: (cause: Cause.Cause<unknown>) => void
  /** False once the reader's stream ended, failed or was dropped (nothing more is taken). */
  readonly open: () => boolean
}

/**
 * A buffer fed synchronously through its `Sink`, and the reader's stream. Every item reaches the reader in order
 * while the buffered weight stays at or below `maxWeight`; past it the reader's stream fails with `FollowerLagging`
 * (after the items already buffered) and the sink takes nothing more; `onLagging` runs at that moment, on a fiber of
 * the current scope (a reader blocked on a full socket would never pull the failure). `last`: the item after which
 * the reader's stream ends.
 */
export const makeSink = <A, E = never>(
  weigh: (item: A) => number,
  maxWeight: number,
  last: (item: A) => boolean = () => false,
  onLagging?: Effect.Effect<void>
): Effect.Effect<{ readonly sink: Sink<A>; readonly stream: Stream.Stream<A, E | FollowerLagging> }, never, Scope.Scope> =>
  Effect.flatMap(Queue.unbounded<A, E | FollowerLagging | Cause.Done>(), (buffer) => sinkOver(buffer, weigh, maxWeight, last, onLagging))

/** `makeSink` over its buffer: one generator function for every buffer (see docs/performance.md, "generators"). */
const sinkOver = Effect.fnUntraced(function* <A, E>(
  buffer: Queue.Queue<A, E | FollowerLagging | Cause.Done>,
  weigh: (item: A) => number,
  maxWeight: number,
  last: (item: A) => boolean,
  onLagging: Effect.Effect<void> | undefined
) {
  // The weight buffered and not yet pulled by the reader. Both sides run on this process's one thread and
  // touch it only in synchronous steps, so a plain variable is enough (issue 18: no Effect per item and side).
  let weight = 0
  let open = true
  // Runs `onLagging` on a fiber of this scope, forked only when the reader falls behind (issue 18: no fiber
  // waiting per follower); closing the scope interrupts it as it would any fiber of the scope.
  let lagged: (() => void) | undefined
  if (onLagging !== undefined) {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<never>()
    lagged = () => void Effect.runForkWith(context)(Effect.forkIn(onLagging, scope, { startImmediately: true }))
  }
  const sink: Sink<A> = {
    offer: (item) => {
      if (!open) return
      weight += weigh(item)
      if (weight > maxWeight) {
        open = false
        // Made only when the reader falls behind (an error captures a stack: not a cost of every follower).
        Queue.failCauseUnsafe(buffer, Cause.fail(new FollowerLagging({ maxWeight })))
        lagged?.()
        return
      }
      Queue.offerUnsafe(buffer, item)
      if (last(item)) sink.end()
    },
    end: () => {
      if (!open) return
      open = false
      Queue.endUnsafe(buffer)
    },
    failCause: (cause) => {
      if (!open) return
      open = false
      Queue.failCauseUnsafe(buffer, cause as Cause.Cause<E>)
    },
    open: () => open
  }
  const stream = Stream.fromQueue(buffer).pipe(Stream.mapArray((items) => {
    for (const item of items) weight -= weigh(item)
    return items
  }))
  return { sink, stream }
})

/**
 * Starts draining `source` into a buffer now (in the current scope) and returns the reader's side: `makeSink`'s
 * rules, with `source` as the publisher (its end ends the reader's stream, its failure fails it).
 */
export const make = Effect.fnUntraced(function* <A, E>(
  source: Stream.Stream<A, E>,
  weigh: (item: A) => number,
  maxWeight: number,
  onLagging?: Effect.Effect<void>
) {
  const { sink, stream } = yield* makeSink<A, E>(weigh, maxWeight, () => false, onLagging)
  yield* source.pipe(
    // Whatever the source has ready is buffered in one step; draining stops once the reader was dropped.
    Stream.runForEachWhile((item) => Effect.sync(() => {
      sink.offer(item)
      return sink.open()
    })),
    Effect.matchCause({ onSuccess: () => sink.end(), onFailure: (cause) => sink.failCause(cause) }),
    Effect.forkScoped
  )
  return stream
})
