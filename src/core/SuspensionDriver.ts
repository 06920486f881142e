/**
 * Core's suspension driver (reference §8.1; protocol "Message families"): one `environment_quiesce` or
 * `environment_resume` on one device connection, answered by `environment_quiesced` / `environment_resumed`.
 *
 * - At most 2 outstanding suspension requests per connection (a third is refused locally with `capacity`);
 *   the request is validated with the proto schema before anything is sent (`rollback` only on resume).
 * - The waiter is registered under the exact request id before the send, so a reply that arrives just before
 *   the Runtime closes the connection (it answers an accepted quiesce and then closes) is still read: the
 *   waiter's buffer is delivered before the connection's loss.
 * - The reply must echo the request's Environment and suspend id (`replyMatches`); otherwise, or without a
 *   reply within the budget (default 15 s: the Runtime's 5 s drain plus its 5 s send budget, and margin), the
 *   outcome is `SuspensionUnknown` — never a refusal.
 * - Never retried, never replayed after a reconnect: the driver is bound to one connection. A caller that
 *   persists attempts (the dev Core, core/dev/Suspensions.ts) records the attempt before calling and the
 *   outcome after.
 */
import { Clock, Duration, Effect, Option, Queue, Result, Schema, Stream } from "effect"
import { ErrorCodes, type Ids, Limits, Suspension } from "../proto/index.js"
import type { DeviceSession } from "./DeviceSession.js"

export const SuspensionOperation = Schema.Literals(["quiesce", "resume"])
export type SuspensionOperation = typeof SuspensionOperation.Type

export interface SuspensionRequest {
  readonly operation: SuspensionOperation
  /** A fresh correlation id per request (a duplicate pending id is refused). */
  readonly requestId: Ids.OperationId
  readonly environmentId: string
  readonly suspendId: string
  /** Resume only: a no-op resume of the still-running source after an uncertain quiesce. */
  readonly rollback?: boolean
}

/** Core's wait for the reply (the Runtime drains up to 5 s, then sends within 5 s). */
export const SuspensionReplyBudget: Duration.Duration = Duration.seconds(15)
/** Outstanding suspension requests per connection (reference §8.1). */
export const MaxOutstandingSuspensions = 2

/** Refused before anything was sent (definite: the Runtime saw nothing). */
export class SuspensionRefused extends Schema.TaggedError<SuspensionRefused>()("SuspensionRefused", {
  reason: Schema.Literals(["invalid_request", "capacity", "not_sent", "waiter_rejected"])
}) {
  override get message() {
    return `suspension request refused before sending (${this.reason})`
  }
}

/** The Runtime's definite refusal (`accepted: false` with a category). */
export class SuspensionRejected extends Schema.TaggedError<SuspensionRejected>()("SuspensionRejected", {
  code: ErrorCodes.SuspensionErrorCode
}) {
  override get message() {
    return `suspension request rejected (${this.code})`
  }
}

/** Sent without proof of the outcome. Never retried or replayed. */
export class SuspensionUnknown extends Schema.TaggedError<SuspensionUnknown>()("SuspensionUnknown", {
  reason: Schema.Literals(["budget_exceeded", "connection_lost", "receipt_overflow", "invalid_reply"])
}) {
  override get message() {
    return `suspension outcome unknown (${this.reason})`
  }
}

export type SuspensionError = SuspensionRefused | SuspensionRejected | SuspensionUnknown

const outstanding = new WeakMap<DeviceSession, number>()

const acquireSlot = (session: DeviceSession) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const n = outstanding.get(session) ?? 0
      if (n >= MaxOutstandingSuspensions) return Effect.fail(new SuspensionRefused({ reason: "capacity" }))
      outstanding.set(session, n + 1)
      return Effect.void
    }),
    () => Effect.sync(() => outstanding.set(session, Math.max(0, (outstanding.get(session) ?? 1) - 1)))
  )

const validPayload = Schema.is(Suspension.SuspensionRequestPayload)
// Lets a reply already routed when the deadline fires be taken instead of the timeout.
const raceWindow = Effect.repeat(Effect.yieldNow, { times: 16 })

/**
 * Sends one request and reads its reply. Success: the Runtime accepted it (quiesce: it drained and closes the
 * connection now; resume: admission reopened, or a repeat/rollback was acknowledged).
 */
export const request = (
  session: DeviceSession,
  req: SuspensionRequest,
  options: { readonly budget?: Duration.Input } = {}
): Effect.Effect<void, SuspensionError> =>
  Effect.scoped(Effect.gen(function* () {
    const payload: Suspension.SuspensionRequestPayload = {
      environment_id: req.environmentId,
      suspend_id: req.suspendId as Ids.SuspensionId,
      ...(req.rollback === undefined ? {} : { rollback: req.rollback })
    }
    if (!validPayload(payload) || (req.operation === "quiesce" && req.rollback === true)) {
      return yield* new SuspensionRefused({ reason: "invalid_request" })
    }
    if (Buffer.byteLength(req.requestId, "utf8") > Limits.MaxCorrelationIdBytes || req.requestId.length === 0) {
      return yield* new SuspensionRefused({ reason: "invalid_request" })
    }
    yield* acquireSlot(session)
    const family = req.operation === "quiesce" ? "environment_quiesced" : "environment_resumed"
    const replies = yield* session.expectReplies(family, req.requestId).pipe(
      Effect.mapError(() => new SuspensionRefused({ reason: "waiter_rejected" }))
    )
    const queue = yield* Stream.toQueue(replies, { capacity: "unbounded" })
    yield* session.send(
      req.operation === "quiesce"
        ? { type: "environment_quiesce", id: req.requestId, payload }
        : { type: "environment_resume", id: req.requestId, payload }
    ).pipe(Effect.mapError(() => new SuspensionRefused({ reason: "not_sent" })))
    const budget = Duration.fromInputUnsafe(options.budget ?? SuspensionReplyBudget)
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(budget)
    const now = yield* Clock.currentTimeMillis
    const reply = yield* Effect.match(Queue.take(queue), {
      onFailure: (e) => Result.fail<SuspensionUnknown["reason"]>(e._tag === "SubscriberOverflow" ? "receipt_overflow" : "connection_lost"),
      onSuccess: (m) => Result.succeed(m.payload)
    }).pipe(
      Effect.timeoutOrElse({
        duration: Math.max(0, deadline - now),
        orElse: () =>
          Effect.andThen(raceWindow, Effect.map(Queue.poll(queue), (o) =>
            Option.isSome(o) ? Result.succeed(o.value.payload) : Result.fail<SuspensionUnknown["reason"]>("budget_exceeded")))
      })
    )
    if (Result.isFailure(reply)) return yield* new SuspensionUnknown({ reason: reply.failure })
    const r = reply.success
    if (!Suspension.replyMatches(payload, r)) return yield* new SuspensionUnknown({ reason: "invalid_reply" })
    if (r.accepted) return
    if (r.error_code === undefined) return yield* new SuspensionUnknown({ reason: "invalid_reply" })
    return yield* new SuspensionRejected({ code: r.error_code })
  })).pipe(
    Effect.withSpan(`Suspension.${req.operation}`),
    Effect.annotateLogs({ request_id: req.requestId, operation: req.operation })
  )
