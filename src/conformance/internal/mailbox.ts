/**
 * An unbounded FIFO fed synchronously from Node callbacks (HTTP requests, socket events) and read as Effects.
 * Used where an Effect Queue cannot be created in time: a listener must exist before the first event fires.
 */
import { Effect, Option } from "effect"

export interface Mailbox<A> {
  /** Adds an item (from any callback). */
  readonly push: (a: A) => void
  /** The next item, waiting for one. */
  readonly take: Effect.Effect<A>
  /** The next item if one is buffered. */
  readonly poll: Effect.Effect<Option.Option<A>>
  /** Items buffered and not taken yet. */
  readonly size: () => number
}

export const makeMailbox = <A>(): Mailbox<A> => {
  const items: Array<A> = []
  const waiters: Array<(a: A) => void> = []
  return {
    push: (a) => {
      const waiter = waiters.shift()
      if (waiter !== undefined) waiter(a)
      else items.push(a)
    },
    take: Effect.callback<A>((resume) => {
      if (items.length > 0) return resume(Effect.succeed(items.shift()!))
      const waiter = (a: A) => resume(Effect.succeed(a))
      waiters.push(waiter)
      return Effect.sync(() => {
        const at = waiters.indexOf(waiter)
        if (at >= 0) waiters.splice(at, 1)
      })
    }),
    poll: Effect.sync(() => (items.length > 0 ? Option.some(items.shift()!) : Option.none())),
    size: () => items.length
  }
}
