/**
 * Shared machinery of the workspace drivers (and of the `runtime_prepare` driver's waiter): the per-connection
 * capacities (4 reads, 1 write, 1 export; the Runtime enforces the same) and a reply waiter over the session's
 * Correlator with one budget per operation.
 *
 * Capacities are kept per `DeviceSession` object, i.e. per physical connection: a reconnect starts from zero
 * and nothing of the old connection is carried over (or replayed). A slot is held for the caller's scope.
 */
import { Cause, Clock, Duration, Effect, Queue, Result, type Scope, Stream } from "effect"
import { Limits } from "../../../proto/index.js"
import type { DeviceSession, ReplyFamilies } from "../../DeviceSession.js"
import type { NotSent } from "../../Errors.js"
import * as Subscriber from "../../Subscriber.js"
import type { SubscriptionError } from "../../Subscriber.js"
import { type UnknownReason, type WorkspaceFamily, WorkspaceRefused } from "../WorkspaceErrors.js"

interface Slots {
  reads: number
  write: boolean
  export: boolean
}

const slots = new WeakMap<DeviceSession, Slots>()

/** Per-connection capacity of each family (reference §7.3–§7.5). */
export const capacityOf = (family: WorkspaceFamily): number => (family === "read" ? Limits.MaxConcurrentReads : 1)

/** Takes one slot of `family` on this connection for the caller's scope, or refuses with `capacity`. */
export const acquireSlot = (session: DeviceSession, family: WorkspaceFamily): Effect.Effect<void, WorkspaceRefused, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const s = slots.get(session) ?? { reads: 0, write: false, export: false }
      slots.set(session, s)
      const free = family === "read" ? s.reads < Limits.MaxConcurrentReads : !s[family]
      if (!free) return Effect.fail(new WorkspaceRefused({ family, reason: "capacity" }))
      if (family === "read") s.reads++
      else s[family] = true
      return Effect.void
    }),
    () =>
      Effect.sync(() => {
        const s = slots.get(session)
        if (s === undefined) return
        if (family === "read") s.reads--
        else s[family] = false
      })
  )

/** How a wait ended without a reply. */
export type WaitEnd = Extract<UnknownReason, "budget_exceeded" | "connection_lost" | "receipt_overflow">

/**
 * The replies of one operation, in arrival order, under one budget for the whole operation.
 *
 * One fiber moves the Correlator's replies into the waiter's queue, and one timer (`startBudget`) ends the wait
 * at the operation's deadline: a chunk's wait is a plain queue take, with no fiber and no timer of its own. A
 * reply routed before the deadline fired (it is given a few scheduler turns to arrive) is still taken first: a
 * reply that raced the deadline wins.
 */
export interface ReplyWaiter<A> {
  /** Arms the operation's budget from now (once, right after the first send); returns the deadline (Core's clock). */
  readonly startBudget: (budget: Duration.Input) => Effect.Effect<number>
  /** The next reply; fails only in its result (`budget_exceeded` once the budget's deadline passed). */
  readonly next: Effect.Effect<Result.Result<A, WaitEnd>>
}

// Lets a reply already routed when the deadline fires be taken instead of the timeout.
const raceWindow = Effect.repeat(Effect.yieldNow, { times: 16 })

/** How a failed reply stream ends the wait. */
const endOf = (e: SubscriptionError): WaitEnd => (e._tag === "SubscriberOverflow" ? "receipt_overflow" : "connection_lost")

/**
 * A waiter over a registered reply stream (the caller's scope owns the budget timer, and the mover fiber when
 * there is one). A Correlator's stream is read directly (`Subscriber.queueOf`): each `next` takes from the
 * subscriber's own queue, so a routed reply wakes the waiting fiber at once (no mover fiber in between), and the
 * budget's end marks the wait expired and ends that queue after what it holds. Any other stream goes through a
 * mover fiber into the waiter's queue.
 */
export const waiterOver = <A, P>(
  replies: Stream.Stream<A, SubscriptionError>,
  payloadOf: (reply: A) => P
): Effect.Effect<ReplyWaiter<P>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const direct = Subscriber.queueOf(replies)
    let expired = false
    const queue = yield* Queue.unbounded<A, WaitEnd | Cause.Done>()
    const take: Effect.Effect<A, WaitEnd | SubscriptionError | Cause.Done> = direct === undefined ? Queue.take(queue) : Queue.take(direct)
    const end = (reason: WaitEnd) =>
      Effect.sync(() => {
        if (direct !== undefined) {
          // Ends the subscriber's queue after the replies it holds (a reply that raced the deadline is still taken
          // first); a later reply finds no waiter, as once the operation's scope closed.
          if (reason === "budget_exceeded") expired = true
          Queue.endUnsafe(direct)
        } else Queue.failCauseUnsafe(queue, Cause.fail(reason))
      })
    // The reply stream never ends by itself; if it did, nothing more can arrive on this connection.
    if (direct === undefined) {
      yield* Stream.runForEach(replies, (reply) => Effect.sync(() => void Queue.offerUnsafe(queue, reply))).pipe(
        Effect.matchEffect({
          onFailure: (e) => end(endOf(e)),
          onSuccess: () => end("connection_lost")
        }),
        Effect.forkScoped
      )
    }
    const scope = yield* Effect.scope
    let started = false
    return {
      startBudget: (budget) =>
        Effect.gen(function*() {
          const millis = Duration.toMillis(Duration.fromInputUnsafe(budget))
          const deadline = (yield* Clock.currentTimeMillis) + millis
          if (started) return deadline
          started = true
          yield* Effect.sleep(Duration.millis(millis)).pipe(Effect.andThen(raceWindow), Effect.andThen(end("budget_exceeded")), Effect.forkIn(scope))
          return deadline
        }),
      next: Effect.match(take, {
        onFailure: (e): Result.Result<P, WaitEnd> =>
          Result.fail(
            Cause.isDone(e)
              ? (expired ? "budget_exceeded" : "connection_lost")
              : typeof e === "string"
              ? e
              : endOf(e)
          ),
        onSuccess: (reply): Result.Result<P, WaitEnd> => Result.succeed(payloadOf(reply))
      })
    }
  })

type Family = "workspace_read_result" | "workspace_write_result" | "workspace_export_result"

/**
 * Registers the waiter of one operation id before its first send (a duplicate pending id is refused: no
 * second operation may share the first one's receipts). Lives in the caller's scope.
 */
export const expect = <F extends Family>(
  session: DeviceSession,
  family: F,
  workspaceFamily: WorkspaceFamily,
  operationId: string
): Effect.Effect<ReplyWaiter<ReplyFamilies[F]["payload"]>, WorkspaceRefused, Scope.Scope> =>
  Effect.gen(function*() {
    const replies = yield* session.expectReplies(family, operationId).pipe(
      Effect.mapError((e) => new WorkspaceRefused({ family: workspaceFamily, reason: "waiter_rejected", detail: e.reason }))
    )
    return yield* waiterOver(replies, (m) => m.payload as ReplyFamilies[F]["payload"])
  })

/** Sends one envelope; a refused send is a definite local refusal. */
export const sendOrRefuse = (
  session: DeviceSession,
  family: WorkspaceFamily,
  message: Parameters<DeviceSession["send"]>[0]
): Effect.Effect<void, WorkspaceRefused> =>
  Effect.mapError(session.send(message), (e: NotSent) => new WorkspaceRefused({ family, reason: "not_sent", detail: e.reason }))
