/**
 * The connection's Executor table and capacity accounting (protocol "Preparation and execution order",
 * style guide §7). Owns every native Executor of this connection from reservation until its close is
 * confirmed.
 *
 * Capacity is derived from the table, so it is freed only when an entry is removed, which happens only
 * after a confirmed close: active = preparing, admitted, busy, closing or cleanup-unconfirmed entries
 * (bounded by `maxActive`); idle = retained idle entries (bounded by `maxIdleExecutors`; an Executor that
 * becomes idle beyond it is closed instead). A full table rejects at once; nothing queues.
 *
 * Never does: publish admission statuses, start Turns, or treat a close timeout as success.
 */
import { Deferred, Effect, FiberMap, FiberSet, Option, Result } from "effect"
import type { PromptRequestPayload } from "../proto/Execution.js"
import type { ExecutorId, SessionId } from "../proto/Ids.js"
import type { Executor, HarnessDeclaration, Residue } from "./harness/Harness.js"
import { closeUntilConfirmed, observed, Ownership } from "./Ownership.js"
import { RuntimePolicy, type RuntimePolicyShape } from "./RuntimePolicy.js"
import type { ExecutorStatus } from "./StatusBoard.js"

export type ExecutorState = "preparing" | "admitted" | "busy" | "idle" | "closing"

/** One owned Executor. Mutable fields change only inside this module's synchronous sections. */
export interface ExecutorEntry {
  readonly id: ExecutorId
  /** The owning Session; absent for an Executor created for a direct prompt_request. */
  readonly sessionId: SessionId | undefined
  readonly kind: string
  /** The declaration snapshot this Executor was admitted with; a later heartbeat never changes it. */
  readonly declaration: HarnessDeclaration
  /** The frozen configuration it was prepared from. */
  readonly configuration: PromptRequestPayload
  /** Reuse key: canonical fingerprint of the configuration without per-Turn members. */
  readonly configFingerprint: string
  readonly environmentId: string | undefined
  readonly stateKey: string | undefined
  /** Session Executors are retained idle after a settled Turn; direct-request Executors are closed. */
  readonly retained: boolean
  /** A read-only preparation owner: no Harness process, no Turns. */
  readonly readOnly: boolean
  native: Executor | undefined
  state: ExecutorState
  /** Set once a close was requested; the Executor can no longer be admitted. */
  closing: boolean
  /** Completes when the close was confirmed (and the entry removed). */
  readonly closed: Deferred.Deferred<void>
}

export interface ReserveSpec {
  readonly sessionId: SessionId | undefined
  readonly kind: string
  readonly declaration: HarnessDeclaration
  readonly configuration: PromptRequestPayload
  readonly configFingerprint: string
  readonly retained: boolean
  readonly readOnly: boolean
}

/**
 * The only capacity rejection. `executor_capacity` (active + idle totals exhausted) cannot happen here: the idle
 * bound is enforced when an Executor would become idle (beyond it, it is closed instead), so the total never
 * exceeds both bounds, and a full active table is `preparation_capacity`, which Core may retry.
 */
export type CapacityRejection = "preparation_capacity"

export interface Executors {
  /** Atomically checks active capacity and records a new Executor in `preparing`. */
  readonly reserve: (id: ExecutorId, spec: ReserveSpec) => Effect.Effect<Result.Result<ExecutorEntry, CapacityRejection>>
  /** The Session's executable Executor, if any (including one that is closing; read-only owners excluded). */
  readonly bySession: (sessionId: SessionId) => Effect.Effect<Option.Option<ExecutorEntry>>
  /** Another Session's Executor bound to the same state key (a session binding conflict). */
  readonly stateKeyOwner: (stateKey: string, sessionId: SessionId) => Effect.Effect<Option.Option<ExecutorEntry>>
  /** Atomically moves an idle Executor to `admitted` when an active slot is free (reuse). */
  readonly admitIdle: (entry: ExecutorEntry) => Effect.Effect<Result.Result<void, CapacityRejection | "not_idle">>
  /** Sets the state of an Executor that is not closing. */
  readonly setState: (entry: ExecutorEntry, state: ExecutorState) => Effect.Effect<void>
  /**
   * The admission or Turn holding this Executor ended and it is healthy: retain it idle (with idle expiry)
   * when it is a retained Session Executor and an idle slot is free; otherwise close it.
   */
  readonly toIdle: (entry: ExecutorEntry) => Effect.Effect<void>
  /**
   * Closes an Executor until the close is confirmed, then removes it (freeing its capacity). Idempotent and
   * safe to call concurrently: every caller waits for the same confirmation. The close itself runs in a
   * connection-owned fiber, so an interrupted caller stops waiting without abandoning the close.
   */
  readonly close: (entry: ExecutorEntry) => Effect.Effect<void>
  /** Starts closing an Executor without waiting for confirmation. */
  readonly closeInBackground: (entry: ExecutorEntry) => Effect.Effect<void>
  /** Closes every Executor and waits until each close is confirmed. */
  readonly closeAll: Effect.Effect<void>
  /** Active entries (capacity in use), for the heartbeat and the status view. */
  readonly counts: Effect.Effect<{ readonly active: number; readonly idle: number }>
  readonly view: Effect.Effect<ReadonlyArray<typeof ExecutorStatus.Type>>
}

/** The native owner of a failed preparation's residue: it can only be closed. */
export const residueExecutor = (residue: Residue): Executor => ({
  startTurn: () => Effect.die("a failed preparation has no Turns"),
  nativeSessionId: Effect.succeed(Option.none()),
  close: residue.close
})

/** The status-board state: an admitted Executor is reserved (shown as busy); a failing close is cleanup_unconfirmed. */
const viewState = (entry: ExecutorEntry, unconfirmed: boolean): (typeof ExecutorStatus.Type)["state"] => {
  switch (entry.state) {
    case "admitted":
      return "busy"
    case "closing":
      return unconfirmed ? "cleanup_unconfirmed" : "closing"
    default:
      return entry.state
  }
}

export interface ExecutorsOptions {
  /** Run after every state change of an entry or its ownership record (the status board's `touch`). */
  readonly onChange?: Effect.Effect<void>
}

/**
 * Builds the table for one connection. Its fibers (closers, idle timers) live in the given scope; create it
 * before anything that may still use Executors while the connection closes.
 */
export const makeWith = (options: ExecutorsOptions) => Effect.gen(function* () {
  const changed = options.onChange ?? Effect.void
  const ownership = options.onChange === undefined ? yield* Ownership : observed(yield* Ownership, options.onChange)
  const policy: RuntimePolicyShape = yield* RuntimePolicy
  const closers = yield* FiberSet.make<void, never>()
  const idleTimers = yield* FiberMap.make<ExecutorId, void, never>()
  const entries = new Map<ExecutorId, ExecutorEntry>()

  const counts = () => {
    let active = 0
    let idle = 0
    for (const e of entries.values()) {
      if (e.state === "idle") idle++
      else active++
    }
    return { active, idle }
  }

  const closeEntry = (entry: ExecutorEntry): Effect.Effect<void> =>
    Effect.gen(function* () {
      const native = entry.native
      if (native !== undefined) {
        yield* closeUntilConfirmed(entry.id, native.close, (e) => e.reason).pipe(
          Effect.provideService(Ownership, ownership),
          Effect.provideService(RuntimePolicy, policy)
        )
      } else {
        yield* ownership.confirmed(entry.id)
      }
      entries.delete(entry.id)
      yield* changed
      yield* Deferred.succeed(entry.closed, undefined)
    }).pipe(Effect.uninterruptible)

  /** Marks the entry closing and forks its close (never from inside its own idle timer's removal). */
  const beginClose = (entry: ExecutorEntry) =>
    Effect.gen(function* () {
      if (entry.closing) return
      entry.closing = true
      entry.state = "closing"
      yield* changed
      yield* FiberSet.run(closers, closeEntry(entry))
    })

  const startClose = (entry: ExecutorEntry) => Effect.andThen(FiberMap.remove(idleTimers, entry.id), beginClose(entry))

  const close = (entry: ExecutorEntry) => Effect.andThen(startClose(entry), Deferred.await(entry.closed))

  const toIdle = (entry: ExecutorEntry) =>
    Effect.gen(function* () {
      if (entry.closing) return
      const { idle } = counts()
      if (!entry.retained || entry.readOnly || entry.native === undefined || idle >= policy.maxIdleExecutors) {
        return yield* startClose(entry)
      }
      entry.state = "idle"
      yield* changed
      yield* FiberMap.run(
        idleTimers,
        entry.id,
        Effect.andThen(
          Effect.sleep(policy.idleExecutorTtl),
          Effect.suspend(() => (entry.state === "idle" && !entry.closing ? beginClose(entry) : Effect.void))
        )
      )
    })

  const executors: Executors = {
    reserve: (id, spec) =>
      Effect.gen(function* () {
        if (counts().active >= policy.maxActive) return Result.fail<CapacityRejection>("preparation_capacity")
        const entry: ExecutorEntry = {
          id,
          sessionId: spec.sessionId,
          kind: spec.kind,
          declaration: spec.declaration,
          configuration: spec.configuration,
          configFingerprint: spec.configFingerprint,
          environmentId: spec.configuration.local_environment?.id,
          stateKey: spec.configuration.agent_state_key,
          retained: spec.retained,
          readOnly: spec.readOnly,
          native: undefined,
          state: "preparing",
          closing: false,
          closed: Deferred.makeUnsafe<void>()
        }
        entries.set(id, entry)
        yield* ownership.acquire(id, "executor")
        return Result.succeed(entry)
      }),
    bySession: (sessionId) =>
      Effect.sync(() => Option.fromNullishOr([...entries.values()].find((e) => e.sessionId === sessionId && !e.readOnly))),
    stateKeyOwner: (stateKey, sessionId) =>
      Effect.sync(() =>
        Option.fromNullishOr(
          [...entries.values()].find((e) => e.stateKey === stateKey && e.sessionId !== undefined && e.sessionId !== sessionId)
        )
      ),
    admitIdle: (entry) =>
      Effect.gen(function* () {
        if (entry.closing || entry.state !== "idle") return Result.fail("not_idle" as const)
        if (counts().active >= policy.maxActive) return Result.fail<CapacityRejection>("preparation_capacity")
        entry.state = "admitted"
        yield* changed
        yield* FiberMap.remove(idleTimers, entry.id)
        return Result.void
      }),
    setState: (entry, state) =>
      Effect.suspend(() => {
        if (entry.closing || entry.state === state) return Effect.void
        entry.state = state
        return changed
      }),
    toIdle,
    close,
    closeInBackground: startClose,
    closeAll: Effect.gen(function* () {
      const all = [...entries.values()]
      yield* Effect.forEach(all, startClose, { discard: true })
      yield* Effect.forEach(all, (e) => Deferred.await(e.closed), { discard: true })
    }),
    counts: Effect.sync(counts),
    view: Effect.gen(function* () {
      const unconfirmed = new Set((yield* ownership.unconfirmed).map((u) => u.resource))
      return [...entries.values()].map((e) => ({
        executor_id: e.id,
        session_id: e.sessionId ?? "",
        kind: e.kind,
        state: viewState(e, unconfirmed.has(e.id))
      }))
    })
  }
  return executors
})

/** `makeWith` without change notification. */
export const make = makeWith({})
