/**
 * Core's side of cancellation (protocol "Active input receipts", "What each acknowledgement proves",
 * "Failures, retries and cleanup"; reference part 1 §7.6): `prompt_cancel` with a delivery id, and its
 * receipt, an `interaction_decision_ack` under the Run id with the same delivery id.
 *
 * What the receipt proves: `applied: true` = the Runtime settled the cancellation natively; its `outcome`
 * carries the stopped Turn's confirmed continuity snapshot when no done carries it. Once cancellation is
 * sent, its receipt owns the Turn's terminal outcome, even if an input became unknown first. No receipt
 * within 15 s (or a lost connection) is `CancelUnconfirmed`: cancellation may have happened; that neither
 * establishes success nor authorizes another execution. A `done` may close a settled cancellation stream; it
 * never overrides the receipt or implies success (the Turn's projection, Outcome.ts, enforces that).
 *
 * Never: treat local interruption, process exit or a socket close as cancellation; retry automatically.
 */
import { Effect, Result } from "effect"
import { ErrorCodes, type Ids, Limits, type RunEvents } from "../proto/index.js"
import type { DeviceSession } from "./DeviceSession.js"
import type { NotSent, SubscriptionRejected } from "./Errors.js"
import { promptCancel } from "./ExecutionRequest.js"
import { registerAck } from "./Interactions.js"
import { CancelFailed, CancelRejected, CancelUnconfirmed } from "./TurnErrors.js"

/** `applied: true`: cancellation settled natively. `outcome` is the continuity snapshot when the Runtime sent one. */
export interface CancelConfirmed {
  readonly run_id: Ids.RunId
  readonly delivery_id: Ids.DeliveryId
  readonly outcome: RunEvents.DonePayload | undefined
}

export type CancelError = NotSent | SubscriptionRejected | CancelRejected | CancelFailed | CancelUnconfirmed

export interface CancelOptions {
  /** Called once the prompt_cancel entered the send queue (from then on the receipt owns the outcome). */
  readonly onDispatched?: Effect.Effect<void>
}

const cancelCodes: ReadonlySet<string> = new Set(ErrorCodes.CancelErrorCode.literals)

/**
 * Sends `prompt_cancel` for a Run with a delivery id and waits at most 15 s for its receipt. Errors:
 * `NotSent` / `SubscriptionRejected` — definite, nothing sent (a duplicate pending delivery id is refused);
 * `CancelRejected{run_inactive}` — the Runtime has no such active Run; `CancelFailed{cancel_failed}` — the
 * Runtime definitely could not stop it; `CancelUnconfirmed` — sent and not proven (no receipt, connection
 * lost, or a code that does not settle it such as cancel_timeout, kept in `code`).
 */
export const cancel = Effect.fn("Cancellation.cancel")(function*(
  session: DeviceSession,
  runId: Ids.RunId,
  deliveryId: Ids.DeliveryId,
  options: CancelOptions = {}
) {
  const ids = { run_id: runId, delivery_id: deliveryId }
  const built = promptCancel(runId, deliveryId)
  if (Result.isFailure(built)) return yield* Effect.die(built.failure)
  return yield* Effect.scoped(
    Effect.gen(function*() {
      // Before dispatch: definite.
      const waiter = yield* registerAck(session, deliveryId, runId)
      yield* session.send(built.success)
      if (options.onDispatched !== undefined) yield* options.onDispatched
      // After dispatch: the receipt decides; without one the cancellation is unconfirmed.
      const ack = yield* Effect.mapError(
        waiter.await(Limits.CancelConfirmationBudget),
        (missing) => new CancelUnconfirmed({ ...ids, reason: missing.reason })
      )
      if (ack.applied) return { ...ids, outcome: ack.outcome } satisfies CancelConfirmed
      const code = ack.error_code
      if (code === "run_inactive") return yield* new CancelRejected({ ...ids, code })
      if (code === "cancel_failed") return yield* new CancelFailed({ ...ids, code })
      return yield* new CancelUnconfirmed({
        ...ids,
        reason: "not_applied",
        ...(code !== undefined && cancelCodes.has(code) ? { code: code as ErrorCodes.CancelErrorCode } : {})
      })
    })
  )
})
