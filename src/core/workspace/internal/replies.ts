/**
 * Shared machinery of the workspace drivers: the per-connection capacities (4 reads, 1 write, 1 export; the
 * Runtime enforces the same) and a reply waiter over the session's Correlator with an absolute deadline.
 *
 * Capacities are kept per `DeviceSession` object, i.e. per physical connection: a reconnect starts from zero
 * and nothing of the old connection is carried over (or replayed). A slot is held for the caller's scope.
 */
import { Clock, Effect, Option, Queue, Result, type Scope, Stream } from "effect"
import { Limits } from "../../../proto/index.js"
import type { DeviceSession, ReplyFamilies } from "../../DeviceSession.js"
import type { NotSent } from "../../Errors.js"
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

export interface ReplyWaiter<A> {
  /** The next reply before `deadlineMs` (Core's clock). A reply that raced the deadline wins. */
  readonly next: (deadlineMs: number) => Effect.Effect<Result.Result<A, WaitEnd>>
}

// Lets a reply already routed when the deadline fires be taken instead of the timeout.
const raceWindow = Effect.repeat(Effect.yieldNow, { times: 16 })

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
    const queue = yield* Stream.toQueue(replies, { capacity: "unbounded" })
    type P = ReplyFamilies[F]["payload"]
    const take = Effect.match(Queue.take(queue), {
      onFailure: (e): Result.Result<P, WaitEnd> =>
        Result.fail(e._tag === "SubscriberOverflow" ? "receipt_overflow" : "connection_lost"),
      onSuccess: (m): Result.Result<P, WaitEnd> => Result.succeed(m.payload as P)
    })
    const pollOnce = Effect.gen(function*() {
      yield* raceWindow
      const polled = yield* Queue.poll(queue)
      return Option.isSome(polled)
        ? Result.succeed(polled.value.payload as P)
        : Result.fail<WaitEnd>("budget_exceeded") as Result.Result<P, WaitEnd>
    })
    return {
      next: (deadlineMs) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.timeoutOrElse(take, { duration: Math.max(0, deadlineMs - now), orElse: () => pollOnce }))
    }
  })

/** Sends one envelope; a refused send is a definite local refusal. */
export const sendOrRefuse = (
  session: DeviceSession,
  family: WorkspaceFamily,
  message: Parameters<DeviceSession["send"]>[0]
): Effect.Effect<void, WorkspaceRefused> =>
  Effect.mapError(session.send(message), (e: NotSent) => new WorkspaceRefused({ family, reason: "not_sent", detail: e.reason }))
