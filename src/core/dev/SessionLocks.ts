/**
 * The Session lock of the dev Core: the scheduling reservation a Files operation holds on an idle Session
 * (protocol "Workspace operations": an idle read runs on the Session's scheduling reservation; a write is
 * reserved under the Session lock). One in-process lock per Session id:
 *
 * - `withLock` waits for the lock (a successor Files operation waits for its predecessor);
 * - `tryWithLock` takes it only when free, else fails with `OperatorConflict{session_busy}` (a Turn start never
 *   waits behind a Files operation, and a Files operation that holds the lock sees every Turn created before).
 *
 * Held for the effect's duration and released on every exit. Locks of Sessions nobody holds are dropped. On
 * several nodes (PostgreSQL) a database lock is taken inside this one (`make(inner)`,
 * pg/DatabaseSessionLocks.ts); a store failure taking it is `OperatorUnavailable`.
 */
import { Context, Effect, Layer, Option, Semaphore } from "effect"
import { FreshMap } from "../../proto/FreshMap.js"
import { OperatorConflict, type OperatorUnavailable } from "./OperatorErrors.js"

/**
 * One one-permit semaphore per key, made on first use and dropped when nobody holds or waits for it;
 * `using(key, use)` runs `use` with the key's semaphore.
 */
const keyedSemaphores = () => {
  const locks = new FreshMap<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
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

/**
 * How a section takes the Session lock: `wait` (a Files operation), `try` (fail `session_busy` at once when it
 * is held), `start` (a Turn start: waits for the Session's earlier starts, then `try`).
 */
export type LockMode = "wait" | "try" | "start"

/**
 * A lock held inside the in-process ones (the database lock of several nodes, pg/DatabaseSessionLocks.ts),
 * with the same `mode`; a store failure taking it is `OperatorUnavailable`.
 */
export type InnerSessionLock = <A, E, R>(
  sessionId: string,
  mode: LockMode,
  effect: Effect.Effect<A, E, R>
) => Effect.Effect<A, E | OperatorConflict | OperatorUnavailable, R>

export class SessionLocks extends Context.Service<SessionLocks, {
  readonly withLock: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | OperatorUnavailable, R>
  readonly tryWithLock: <A, E, R>(
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | OperatorConflict | OperatorUnavailable, R>
  /**
   * A Turn start's section: waits for the Session's earlier starts (two starts on one Session never both pass
   * the one-unfinished-Turn check), then takes the lock as `tryWithLock` does (a start never waits behind a
   * Files operation).
   */
  readonly forStart: <A, E, R>(
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | OperatorConflict | OperatorUnavailable, R>
}>()("agentwire/core/dev/SessionLocks") {
  /** The in-process locks alone (one Core process: SQLite). */
  static readonly layer = Layer.sync(SessionLocks, () => make())
  /** The in-process locks, then `inner` while holding them (several nodes: the database lock). */
  static readonly make = (inner?: InnerSessionLock) => make(inner)
}

const busy = () => new OperatorConflict({ reason: "session_busy", detail: "a Files operation holds the Session" })

const make = (inner?: InnerSessionLock) => {
  const using = keyedSemaphores()
  const starting = makeKeyedLock()
  const within = <A, E, R>(sessionId: string, mode: LockMode, effect: Effect.Effect<A, E, R>) =>
    inner === undefined ? effect as Effect.Effect<A, E | OperatorConflict | OperatorUnavailable, R> : inner(sessionId, mode, effect)
  const tryLocal = <A, E, R>(sessionId: string, mode: LockMode, effect: Effect.Effect<A, E, R>) =>
    using(sessionId, (s) =>
      Effect.flatMap(
        Semaphore.withPermitsIfAvailable(s, 1, within(sessionId, mode, effect)),
        (result) => Option.isSome(result) ? Effect.succeed(result.value) : Effect.fail(busy())
      ))
  return SessionLocks.of({
    // A waiting section never gets session_busy from `inner` (it waits there too); the cast drops it.
    withLock: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) =>
      using(sessionId, (s) => s.withPermits(1)(within(sessionId, "wait", effect) as Effect.Effect<A, E | OperatorUnavailable, R>)),
    tryWithLock: (sessionId, effect) => tryLocal(sessionId, "try", effect),
    forStart: (sessionId, effect) => starting(sessionId, tryLocal(sessionId, "start", effect))
  })
}
