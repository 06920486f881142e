/**
 * The connection's Executor table and capacity accounting (protocol "Preparation and execution order",
 * style guide §7). Owns every native Executor of this connection from reservation until its close is
 * confirmed.
 *
 * Ownership as nested scopes: each Executor lives in its own child scope of the connection scope
 * (`Scope.fork`, made at reservation). `prepare` runs the Harness's preparation inside that scope, so native
 * state the adapter acquires there (`Effect.acquireRelease`) is owned from the moment it exists; once the
 * preparation returned, `closeUntilConfirmed(executor.close)` is registered in the same scope in one
 * uninterruptible step. Closing an Executor closes its scope: the confirmed close first (retried until it
 * confirms), then the adapter's own last-resort releases (a fallible one, such as a directory removal, closes
 * until confirmed too, with this table's `Ownership`: its failed attempts count as the Executor's). An `execution_release`, shutdown or expiry that
 * interrupts a preparation after the native side was created therefore still stops it. The table below is a
 * view of the open scopes: an entry is removed only after its scope closed.
 *
 * Capacity is held in scopes (CapacityPermits.ts): each admission — a reservation, a reuse of an idle
 * Executor, or a direct Run's Executor — acquires its active permit in its own permit scope, a child of the
 * Executor's `holdings` scope. The permit stays with the admission and the Run it hands over to, and returns
 * exactly when that ownership ends: `toIdle` closes the permit scope, and closing the Executor closes
 * `holdings` only after the confirmed close (it was forked first, so it is finalized last). An idle Executor
 * that starts closing takes a permit again, so closing and cleanup-unconfirmed Executors count as active
 * (bounded by `maxActive`); idle = retained idle entries (bounded by `maxIdleExecutors`; an Executor that
 * becomes idle beyond it is closed instead). A full table rejects at once; nothing queues.
 *
 * Never does: publish admission statuses, start Turns, or treat a close timeout as success.
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, FiberSet, Layer, Option, Result, Scope } from "effect"
import * as DueOrder from "../proto/DueOrder.js"
import type { PromptRequestPayload } from "../proto/Execution.js"
import type { ExecutorId, SessionId } from "../proto/Ids.js"
import type { Executor, Harness, HarnessDeclaration, PrepareFailed, PrepareRequest } from "./harness/Harness.js"
import { makeCapacityPermits } from "./CapacityPermits.js"
import { resolveMcpBindings } from "./harness/McpBindings.js"
import { closeUntilConfirmed, observed, Ownership } from "./Ownership.js"
import { RuntimePolicy, type RuntimePolicyShape } from "./RuntimePolicy.js"
import { type ExecutorStatus, StatusBoard } from "./StatusBoard.js"

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
  /** The Executor's own scope (a child of the connection scope): its native state and its confirmed close. */
  readonly scope: Scope.Closeable
  /** The parent of this Executor's permit scopes; the first child of `scope`, so it closes last. */
  readonly holdings: Scope.Closeable
  /** The current admission's permit scope (held through its Run); undefined while the Executor is idle. */
  permit: Scope.Closeable | undefined
  native: Executor | undefined
  state: ExecutorState
  /** Set once a close was requested; the Executor can no longer be admitted. */
  closing: boolean
  /** Completes when the close was confirmed (and the entry removed). */
  readonly closed: Deferred.Deferred<void>
  /**
   * Completes at the first cleanup attempt that failed or timed out, of the Executor's close or of a resource its
   * adapter owns in its scope (cleanup unconfirmed; still owned).
   */
  readonly cleanupFailed: Deferred.Deferred<void>
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

export interface ExecutorsShape {
  /** Atomically checks active capacity and records a new Executor in `preparing`, with its own child scope. */
  readonly reserve: (id: ExecutorId, spec: ReserveSpec) => Effect.Effect<Result.Result<ExecutorEntry, CapacityRejection>>
  /**
   * Runs the Harness's preparation inside the Executor's scope and, on success, registers the confirmed close
   * there and records the native Executor. A failure's `residue` (compatibility) is registered the same way.
   * Interruptible while the adapter prepares; whatever it acquired stays owned by the scope, which `close`
   * closes.
   */
  readonly prepare: (entry: ExecutorEntry, harness: Harness, request: PrepareRequest) => Effect.Effect<Executor, PrepareFailed>
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
  /**
   * Starts closing an Executor and waits for the first verdict: `confirmed` once the close was confirmed, or
   * `unconfirmed` as soon as one close attempt failed or timed out first. Either way the close goes on (retried
   * until confirmed, capacity held); `close` waits for the confirmation.
   */
  readonly closeObserved: (entry: ExecutorEntry) => Effect.Effect<"confirmed" | "unconfirmed">
  /** Closes every Executor and waits until each close is confirmed. */
  readonly closeAll: Effect.Effect<void>
  /** The open Executor with this id (workspace targets). */
  readonly byId: (id: string) => Effect.Effect<Option.Option<ExecutorEntry>>
  /** Active entries (capacity in use), for the heartbeat and the status view. */
  readonly counts: Effect.Effect<{ readonly active: number; readonly idle: number }>
  /** Every owned Executor (a snapshot), for checks that need more than counts (suspension's unsettled work). */
  readonly entries: Effect.Effect<ReadonlyArray<ExecutorEntry>>
  readonly view: Effect.Effect<ReadonlyArray<typeof ExecutorStatus.Type>>
}

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
  // The parent of every Executor scope, made now so that the connection scope closes it where this table sits
  // in the finalizer order (after Runs and preparations stopped), never before a Run it serves.
  const executorsScope = yield* Scope.fork(yield* Effect.scope, "parallel")
  const changed = options.onChange ?? Effect.void
  const ownership = options.onChange === undefined ? yield* Ownership : observed(yield* Ownership, options.onChange)
  const policy: RuntimePolicyShape = yield* RuntimePolicy
  const closers = yield* FiberSet.make<void, never>()
  // The idle expiries (all one length) share one timer (issue 18: a sleeping fiber per idle period cost a fiber and a
  // timer per Turn). A fired one closes the Executor only if it is still idle.
  const clock = yield* Clock.Clock
  const idleTtlMs = Duration.toMillis(policy.idleExecutorTtl)
  const runClose = yield* FiberSet.runtime(closers)<never>()
  const idleExpiry = yield* DueOrder.make<ExecutorEntry>((entry) => {
    if (entry.state === "idle" && !entry.closing) runClose(beginClose(entry))
  })
  const notIdle = (entry: ExecutorEntry) => Effect.sync(() => idleExpiry.remove(entry))
  const entries = new Map<ExecutorId, ExecutorEntry>()
  const permits = makeCapacityPermits(policy.maxActive)

  const counts = () => {
    let idle = 0
    for (const e of entries.values()) if (e.state === "idle") idle++
    return { active: permits.inUse(), idle }
  }

  /** A new permit scope under the Executor's holdings, with a permit in it; undefined (nothing held) when full. */
  const admit = Effect.fnUntraced(function* (entry: Pick<ExecutorEntry, "holdings">) {
    const permit = yield* Scope.fork(entry.holdings, "sequential")
    if (yield* permits.acquire(permit)) return permit
    yield* Scope.close(permit, Exit.void)
    return undefined
  })

  /**
   * The connection's ownership records, where a failed cleanup attempt of anything the Executor owns (its
   * confirmed close, or a resource its adapter closes in a release: `OwnedDirectory.ts`) also completes the
   * entry's `cleanupFailed`, so an admission can report unconfirmed cleanup while it retries.
   */
  const reporting = (entry: ExecutorEntry) =>
    Ownership.of({
      ...ownership,
      attemptFailed: (resource, cause) =>
        Effect.andThen(ownership.attemptFailed(resource, cause), Deferred.succeed(entry.cleanupFailed, undefined))
    })

  /** The confirmed close of one native owner, registered in its Executor's scope. */
  const confirmedClose = (entry: ExecutorEntry, close: Executor["close"]) =>
    closeUntilConfirmed(entry.id, close, (e) => e.reason).pipe(
      Effect.provideService(Ownership, reporting(entry)),
      Effect.provideService(RuntimePolicy, policy)
    )

  /** Closes the Executor's scope (confirmed close first, then the adapter's releases), then removes the entry. */
  const closeEntry = (entry: ExecutorEntry): Effect.Effect<void> =>
    Effect.gen(function* () {
      yield* Scope.close(entry.scope, Exit.void)
      yield* ownership.confirmed(entry.id)
      entries.delete(entry.id)
      yield* changed
      yield* Deferred.succeed(entry.closed, undefined)
    }).pipe(Effect.uninterruptible)

  const prepare = (entry: ExecutorEntry, harness: Harness, request: PrepareRequest) =>
    Effect.uninterruptibleMask((restore) =>
      // MCP: the request's public servers and the installed ones become the Executor's transient bindings.
      restore(harness.prepare({ ...request, mcpServers: resolveMcpBindings(request.configuration, []) })).pipe(
        Scope.provide(entry.scope),
        Effect.provideService(Ownership, reporting(entry)),
        Effect.provideService(RuntimePolicy, policy),
        Effect.tap((native) =>
          Effect.andThen(
            Scope.addFinalizer(entry.scope, confirmedClose(entry, native.close)),
            Effect.sync(() => {
              entry.native = native
            })
          )
        ),
        Effect.tapError((failed) =>
          failed.residue === undefined ? Effect.void : Scope.addFinalizer(entry.scope, confirmedClose(entry, failed.residue.close))
        )
      )
    )

  /** Marks the entry closing and forks its close. */
  const beginClose = (entry: ExecutorEntry) =>
    Effect.gen(function* () {
      if (entry.closing) return
      entry.closing = true
      entry.state = "closing"
      // Closing and unconfirmed Executors count as active until confirmed: an idle one takes a permit again.
      if (entry.permit === undefined) {
        entry.permit = yield* Scope.fork(entry.holdings, "sequential")
        yield* permits.acquireBeyond(entry.permit)
      }
      yield* changed
      yield* FiberSet.run(closers, closeEntry(entry))
    })

  const startClose = (entry: ExecutorEntry) => Effect.andThen(notIdle(entry), beginClose(entry))

  const close = (entry: ExecutorEntry) => Effect.andThen(startClose(entry), Deferred.await(entry.closed))

  const toIdle = Effect.fnUntraced(function* (entry: ExecutorEntry) {
    if (entry.closing) return
    const { idle } = counts()
    if (!entry.retained || entry.readOnly || entry.native === undefined || idle >= policy.maxIdleExecutors) {
      return yield* startClose(entry)
    }
    entry.state = "idle"
    // The admission's (or its Run's) ownership ended: its permit scope closes, returning the permit.
    const permit = entry.permit
    entry.permit = undefined
    if (permit !== undefined) yield* Scope.close(permit, Exit.void)
    yield* changed
    idleExpiry.remove(entry)
    idleExpiry.arm(entry, clock.currentTimeMillisUnsafe() + idleTtlMs)
  })

  const executors: ExecutorsShape = {
    reserve: (id, spec) =>
      Effect.gen(function* () {
        const scope = yield* Scope.fork(executorsScope, "sequential")
        const holdings = yield* Scope.fork(scope, "sequential")
        const permit = yield* admit({ holdings })
        if (permit === undefined) {
          yield* Scope.close(scope, Exit.void)
          return Result.fail<CapacityRejection>("preparation_capacity")
        }
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
          scope,
          holdings,
          permit,
          native: undefined,
          state: "preparing",
          closing: false,
          closed: Deferred.makeUnsafe<void>(),
          cleanupFailed: Deferred.makeUnsafe<void>()
        }
        entries.set(id, entry)
        yield* ownership.acquire(id, "executor")
        return Result.succeed(entry)
      }),
    prepare,
    bySession: (sessionId) =>
      Effect.sync(() => Option.fromNullishOr([...entries.values()].find((e) => e.sessionId === sessionId && !e.readOnly))),
    stateKeyOwner: (stateKey, sessionId) =>
      Effect.sync(() =>
        Option.fromNullishOr(
          [...entries.values()].find((e) => e.stateKey === stateKey && e.sessionId !== undefined && e.sessionId !== sessionId)
        )
      ),
    admitIdle: Effect.fnUntraced(function* (entry: ExecutorEntry) {
      if (entry.closing || entry.state !== "idle") return Result.fail<CapacityRejection | "not_idle">("not_idle")
      const permit = yield* admit(entry)
      if (permit === undefined) return Result.fail<CapacityRejection | "not_idle">("preparation_capacity")
      entry.permit = permit
      entry.state = "admitted"
      yield* changed
      yield* notIdle(entry)
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
    closeObserved: (entry) =>
      Effect.andThen(
        startClose(entry),
        Effect.raceFirst(
          Effect.as(Deferred.await(entry.closed), "confirmed" as const),
          Effect.as(Deferred.await(entry.cleanupFailed), "unconfirmed" as const)
        )
      ),
    closeAll: Effect.gen(function* () {
      const all = [...entries.values()]
      yield* Effect.forEach(all, startClose, { discard: true })
      yield* Effect.forEach(all, (e) => Deferred.await(e.closed), { discard: true })
    }),
    byId: (id) => Effect.sync(() => Option.fromNullishOr(entries.get(id as ExecutorId))),
    counts: Effect.sync(counts),
    entries: Effect.sync(() => [...entries.values()]),
    view: Effect.gen(function* () {
      const unconfirmed = new Set((yield* ownership.unconfirmed).map((u) => u.resource))
      return [...entries.values()].map((e) => ({
        executor_id: e.id,
        session_id: e.sessionId ?? "",
        kind: e.kind,
        state: viewState(e, unconfirmed.has(e.id) || Deferred.isDoneUnsafe(e.cleanupFailed))
      }))
    })
  }
  return executors
})

/**
 * The Executor table of one connection, built inside the connection's scope before the Runs and admissions that
 * use it (so it is torn down after them): closing the connection closes every Executor until confirmed.
 */
export class Executors extends Context.Service<Executors, ExecutorsShape>()("agentwire/runtime/Executors") {
  static readonly layer = Layer.effect(
    Executors,
    Effect.gen(function* () {
      const executors = yield* makeWith({ onChange: (yield* StatusBoard).touch })
      yield* Effect.addFinalizer(() => executors.closeAll)
      return Executors.of(executors)
    })
  )
}
