/**
 * The Session lock of the dev Core: the scheduling reservation a Files operation holds on an idle Session
 * (protocol "Workspace operations": an idle read runs on the Session's scheduling reservation; a write is
 * reserved under the Session lock). One in-process lock per Session id:
 *
 * - `withLock` waits for the lock (a successor Files operation waits for its predecessor);
 * - `tryWithLock` takes it only when free, else fails with `OperatorConflict{session_busy}` (a Turn start never
 *   waits behind a Files operation, and a Files operation that holds the lock sees every Turn created before).
 *
 * Held for the effect's duration and released on every exit. Locks of Sessions nobody holds are dropped.
 */
import { Context, Effect, Layer, Option, Semaphore } from "effect"
import { OperatorConflict } from "./OperatorErrors.js"

/**
 * One one-permit semaphore per key, made on first use and dropped when nobody holds or waits for it;
 * `using(key, use)` runs `use` with the key's semaphore.
 */
const keyedSemaphores = () => {
  const locks = new Map<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
  return <A, E, R>(key: string, use: (s: Semaphore.Semaphore) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        let entry = locks.get(key)
        if (entry === undefined) {
          entry = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
          locks.set(key, entry)
        }
        entry.users++
        return entry
      }),
      (entry) => use(entry.semaphore),
      (entry) =>
        Effect.sync(() => {
          entry.users--
          if (entry.users === 0 && locks.get(key) === entry) locks.delete(key)
        })
    )
}

/** A lock per key (e.g. per Session id): `effect` runs while holding `key`'s lock, waiting for it if held. */
export const makeKeyedLock = (): (<A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) => {
  const using = keyedSemaphores()
  return (key, effect) => using(key, (s) => s.withPermits(1)(effect))
}

export class SessionLocks extends Context.Service<SessionLocks, {
  readonly withLock: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  readonly tryWithLock: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | OperatorConflict, R>
}>()("agentwire/core/dev/SessionLocks") {
  static readonly layer = Layer.sync(SessionLocks, () => {
    const using = keyedSemaphores()
    return SessionLocks.of({
      withLock: (sessionId, effect) => using(sessionId, (s) => s.withPermits(1)(effect)),
      tryWithLock: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) =>
        using(sessionId, (s) =>
          Effect.flatMap(
            Semaphore.withPermitsIfAvailable(s, 1, effect as Effect.Effect<A, E | OperatorConflict, R>),
            (result) =>
              Option.isSome(result)
                ? Effect.succeed(result.value)
                : Effect.fail(new OperatorConflict({ reason: "session_busy", detail: "a Files operation holds the Session" }))
          ))
    })
  })
}
