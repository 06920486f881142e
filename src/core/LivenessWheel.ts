/**
 * One liveness timer for every connection of a gateway (issue 18, per-connection cost): instead of a sleeping
 * fiber per connection, each connection registers its deadline here and one fiber sleeps to the earliest check
 * time of all of them (a min-heap by check time).
 *
 * A check works exactly like the per-connection sleep it replaces: at its check time the wheel asks the
 * connection how long remains to its deadline (`remaining()`; inbound frames move the deadline without touching
 * the wheel); when nothing remains, `expire` runs (once), otherwise the connection is checked again when the
 * remaining time has passed. So a deadline is met to the millisecond on any Clock (TestClock in tests), and a busy
 * connection costs the wheel one heap operation per deadline period, not per frame. Checks due within
 * `CheckAheadMs` are made together, so the fiber wakes once for all of them.
 */
import { Clock, Deferred, Duration, Effect, Exit, type Scope } from "effect"

export interface LivenessWatch {
  /** Milliseconds left to the connection's deadline (≤ 0: it passed). */
  readonly remaining: () => number
  /** The deadline passed: ends the connection. Runs at most once, on the wheel's fiber; must not block. */
  readonly expire: Effect.Effect<void>
}

export interface LivenessWheel {
  /** Watches a connection from now until the caller's scope closes (or its deadline passes). */
  readonly watch: (entry: LivenessWatch) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Watches a connection from now until the returned function is called (or its deadline passes): `watch`
   * without a scope, for a connection that runs on callbacks (issue 18). Synchronous; calling the function again
   * does nothing.
   */
  readonly add: (entry: LivenessWatch) => () => void
  /** Connections being watched (tests, metrics). */
  readonly size: () => number
}

interface Slot {
  at: number
  readonly entry: LivenessWatch
  removed: boolean
}

/**
 * A binary min-heap of slots by `at`. Swaps go through a local, not an array pattern: at 10,000 connections the
 * pattern's arrays were a few hundred bytes of garbage per heartbeat (issue 18, heap sampling of an idle dev Core).
 */
class Heap {
  private readonly items: Array<Slot> = []
  get length() {
    return this.items.length
  }
  peek(): Slot | undefined {
    return this.items[0]
  }
  push(slot: Slot) {
    const a = this.items
    a.push(slot)
    let i = a.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      const above = a[parent]!
      if (above.at <= slot.at) break
      a[i] = above
      i = parent
    }
    a[i] = slot
  }
  pop(): Slot | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (a.length > 0 && last !== undefined) this.sinkFrom(last)
    return top
  }
  /** The top slot's `at` grew: moves it to its place (one pass instead of a pop and a push). */
  retop(): void {
    const top = this.items[0]
    if (top !== undefined) this.sinkFrom(top)
  }
  /** Puts `slot` at the root's place and moves it down to where it belongs. */
  private sinkFrom(slot: Slot): void {
    const a = this.items
    const n = a.length
    let i = 0
    while (true) {
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      const child = r < n && a[r]!.at < a[l]!.at ? r : l
      const below = a[child]!
      if (below.at >= slot.at) break
      a[i] = below
      i = child
    }
    a[i] = slot
  }
}

/**
 * Slots whose check time is at most this far ahead are checked in the same pass as the ones that are due. A check
 * before the deadline only re-arms the slot at its deadline (it never expires early, and a deadline inside the
 * window is still met to the millisecond), so the fiber wakes about once per this period for any number of
 * connections instead of once per connection's check time (issue 18: at 10,000 connections that was a few hundred
 * wake-ups a second, 8 µs of CPU per heartbeat).
 */
export const CheckAheadMs = 1000

/** The wheel, its one fiber running in the caller's scope. */
export const make: Effect.Effect<LivenessWheel, never, Scope.Scope> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const heap = new Heap()
  let watched = 0
  /** Completed to wake the fiber early: a slot went in before the time it sleeps to, or into an empty wheel. */
  let wake = yield* Deferred.make<void>()
  let sleepingUntil = Number.POSITIVE_INFINITY

  const due = Effect.gen(function*() {
    const now = clock.currentTimeMillisUnsafe()
    const horizon = now + CheckAheadMs
    /** Slots re-armed within the horizon in this pass, put back after it (each slot is checked once per pass). */
    let rearmed: Array<Slot> | undefined
    while (true) {
      const head = heap.peek()
      if (head === undefined || head.at > horizon) break
      if (head.removed) {
        heap.pop()
        continue
      }
      const left = head.entry.remaining()
      if (left > 0) {
        head.at = now + left
        // Past the horizon this pass cannot meet it again: it moves down in place (the usual case, a busy connection).
        if (head.at > horizon) heap.retop()
        else {
          heap.pop()
          ;(rearmed ??= []).push(head)
        }
        continue
      }
      heap.pop()
      head.removed = true
      watched--
      yield* head.entry.expire
    }
    if (rearmed !== undefined) for (const slot of rearmed) heap.push(slot)
  })

  /** One turn of the wheel's fiber: expire what is due, then sleep to the earliest check time or an early wake. */
  const step = Effect.gen(function*() {
    yield* due
    const head = heap.peek()
    const signal = wake
    if (head === undefined) {
      sleepingUntil = Number.POSITIVE_INFINITY
      yield* Deferred.await(signal)
    } else {
      sleepingUntil = head.at
      const delay = Math.max(0, head.at - clock.currentTimeMillisUnsafe())
      yield* Effect.raceFirst(Effect.sleep(Duration.millis(delay)), Deferred.await(signal))
    }
    // The next early wake needs a fresh signal only once this one fired.
    if (signal === wake && Deferred.isDoneUnsafe(signal)) wake = yield* Deferred.make<void>()
  })
  yield* Effect.forkScoped(Effect.forever(step))

  const add = (entry: LivenessWatch): () => void => {
    const slot: Slot = { at: clock.currentTimeMillisUnsafe() + Math.max(0, entry.remaining()), entry, removed: false }
    heap.push(slot)
    watched++
    if (slot.at < sleepingUntil) Deferred.doneUnsafe(wake, Exit.void)
    return () => {
      if (!slot.removed) {
        slot.removed = true
        watched--
      }
    }
  }

  const watch = (entry: LivenessWatch) =>
    Effect.acquireRelease(Effect.sync(() => add(entry)), (remove) => Effect.sync(remove)).pipe(Effect.asVoid)

  return { watch, add, size: () => watched }
})
