/**
 * Cancellation, Runtime side (protocol "Active input receipts" and "What each acknowledgement proves"; reference
 * part 1 §8): `prompt_cancel` asks the Run's Turn to cancel from a connection-owned fiber; a receipt waiter
 * answers `interaction_decision_ack` (Envelope.id = Run id) only after native settlement: `applied: true` with
 * the confirmed continuity snapshot in `outcome` (done then carries no content), or `applied: false` with
 * `run_inactive`, `cancel_timeout` (no settlement within 10 s; ownership is kept), `cancel_failed` or
 * `cancel_outcome_unavailable`. The receipt owns the terminal outcome: the Run reads `receiptWaiters` at
 * settlement to decide whether `done` carries the snapshot.
 */
import { Context, Deferred, Effect, FiberSet, Layer, Option, Result } from "effect"
import type { CancelErrorCode } from "../proto/ErrorCodes.js"
import type { DeliveryId, RunId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import { CancelSettlementBudget, ReceiptSendBudget } from "../proto/Limits.js"
import type { DonePayload } from "../proto/RunEvents.js"
import { Background } from "./ConnectionServices.js"
import { type Settlement, settledDone, type SettlementUnconfirmed } from "./harness/Harness.js"
import { Outbound, withTrace } from "./Outbound.js"
import { NoTurn } from "./RunRecord.js"
import { Runs } from "./Runs.js"
import { StatusBoard } from "./StatusBoard.js"
import * as RuntimeMetrics from "./RuntimeMetrics.js"

export interface CancellationShape {
  /** Handles prompt_cancel; never waits (the receipt waiter runs in a connection-owned fiber). */
  readonly cancel: (runId: RunId, deliveryId: DeliveryId | undefined, trace: string | undefined) => Effect.Effect<void>
}

const makeCancellation = Effect.gen(function* () {
  const outbound = yield* Outbound
  const runs = yield* Runs
  const background = yield* Background
  const changed = (yield* StatusBoard).touch

  const ack = (
    runId: RunId,
    deliveryId: DeliveryId,
    trace: string | undefined,
    result: { readonly applied: true; readonly outcome: DonePayload } | { readonly applied: false; readonly code: CancelErrorCode }
  ) =>
    Effect.andThen(RuntimeMetrics.cancel(result.applied ? "applied" : result.code), outbound.sendWithin(
      withTrace({
        type: "interaction_decision_ack",
        id: unsafeMake.ackSubjectId(runId),
        payload: result.applied
          ? { delivery_id: deliveryId, applied: true, outcome: result.outcome }
          : { delivery_id: deliveryId, applied: false, error_code: result.code }
      }, trace),
      ReceiptSendBudget
    ))

  type CancelResult =
    | { readonly _tag: "Settled"; readonly settlement: Result.Result<Settlement, SettlementUnconfirmed | NoTurn> }
    | { readonly _tag: "RequestFailed" }
    | { readonly _tag: "Timeout" }

  const cancel = (runId: RunId, deliveryId: DeliveryId | undefined, trace: string | undefined) =>
    Effect.gen(function* () {
      const found = yield* runs.get(runId)
      const run = Option.getOrUndefined(found)
      if (run === undefined || run.phase === "settling" || run.phase === "finished") {
        // The Turn already settled on its own (or there is no Run): nothing to cancel. The receipt follows the
        // Run's done when one is still coming.
        if (deliveryId !== undefined) {
          const after = run === undefined ? Effect.void : Deferred.await(run.finished)
          yield* FiberSet.run(background, Effect.andThen(after, ack(runId, deliveryId, trace, { applied: false, code: "run_inactive" })))
        }
        return
      }
      run.cancelRequested = true
      yield* changed
      if (deliveryId !== undefined) run.receiptWaiters++
      // The native cancel request belongs to the connection, not to the waiter: a waiter that times out
      // stops observing and never interrupts the request.
      const requested = yield* Deferred.make<void, "failed" | "no_turn">()
      yield* FiberSet.run(
        background,
        Deferred.await(run.turnReady).pipe(
          Effect.mapError(() => "no_turn" as const),
          Effect.flatMap((turn) => Effect.mapError(turn.cancel, () => "failed" as const)),
          Effect.matchEffect({
            onFailure: (e) => Deferred.fail(requested, e),
            onSuccess: () => Deferred.succeed(requested, undefined)
          })
        )
      )
      if (deliveryId === undefined) return
      const waiter = Effect.gen(function* () {
        const result: CancelResult = yield* Deferred.await(requested).pipe(
          Effect.flatMap(() => Effect.result(Deferred.await(run.nativeSettled))),
          Effect.map((settlement): CancelResult => ({ _tag: "Settled", settlement })),
          Effect.catch((e) =>
            e === "no_turn"
              ? Effect.succeed<CancelResult>({ _tag: "Settled", settlement: Result.fail(new NoTurn()) })
              : Effect.sync((): CancelResult => {
                run.receiptWaiters--
                return { _tag: "RequestFailed" }
              })
          ),
          Effect.timeoutOrElse({
            duration: CancelSettlementBudget,
            // A settlement that raced the deadline wins; otherwise this waiter stops observing and is no longer
            // counted (checked and uncounted in one synchronous step, so done then carries the snapshot).
            orElse: () =>
              Effect.suspend(() => {
                if (Deferred.isDoneUnsafe(run.nativeSettled)) {
                  return Effect.map(Effect.result(Deferred.await(run.nativeSettled)), (settlement): CancelResult => ({
                    _tag: "Settled",
                    settlement
                  }))
                }
                run.receiptWaiters--
                return Effect.succeed<CancelResult>({ _tag: "Timeout" })
              })
          })
        )
        if (result._tag !== "Settled") {
          return yield* ack(runId, deliveryId, trace, {
            applied: false,
            code: result._tag === "Timeout" ? "cancel_timeout" : "cancel_failed"
          })
        }
        const s = result.settlement
        if (Result.isFailure(s)) {
          return yield* ack(runId, deliveryId, trace, {
            applied: false,
            code: s.failure._tag === "NoTurn" ? "run_inactive" : "cancel_outcome_unavailable"
          })
        }
        // The receipt follows the Run's done (which closes the stream).
        yield* Deferred.await(run.finished)
        return yield* s.success.outcome === "cancelled"
          ? ack(runId, deliveryId, trace, { applied: true, outcome: settledDone(s.success) })
          : ack(runId, deliveryId, trace, { applied: false, code: "run_inactive" })
      })
      yield* FiberSet.run(background, waiter)
    })

  return Cancellation.of({ cancel })
})

/** `prompt_cancel` and its receipts for one connection. */
export class Cancellation extends Context.Service<Cancellation, CancellationShape>()("agentwire/runtime/Cancellation") {
  static readonly layer = Layer.effect(Cancellation, makeCancellation)
}
