/**
 * The Turn outcome projection (protocol "Failures, retries and cleanup", "What each acknowledgement
 * proves"): the pure reducer `step` over the fact journal, and `project(runId, facts)`, the fold that both live
 * delivery and restart replay use. The resolution it settles on carries the typed error that says what is
 * known (`TurnOutcome.TurnResolution`); the state and the settlement rules live in `internal/settlement.ts`.
 *
 * Never: an engine failure code deciding the status; a `done` overriding a cancellation receipt; inventing
 * usage (absent = unknown).
 */
import { ErrorCodes, type Interaction, Preparation } from "../proto/index.js"
import {
  type Continuity,
  continuityOf,
  fillContinuity,
  initial,
  inputUnknown,
  isPending,
  observationEnded,
  refresh,
  settleFailed,
  settleFromDone,
  settleOk,
  type TurnState
} from "./internal/settlement.js"
import type { RunEvent } from "./RunEvent.js"
import type { TurnFact } from "./TurnFact.js"
import {
  CancelFailed,
  CancelUnconfirmed,
  DeliveryRefused,
  PreparationFailed,
  PreparationRejected
} from "./TurnErrors.js"
import type { TurnResolution } from "./TurnOutcome.js"

export { initial, type TurnState }

type CancelState = NonNullable<TurnState["cancel"]>

/** `failed` codes that say the admission's cleanup is not confirmed yet (a release follows once it is). */
export const isCleanupUnconfirmed = (code: ErrorCodes.PreparationErrorCode): boolean =>
  code === "cleanup_unconfirmed" || code === "executor_cleanup_unconfirmed"

/** A failed admission whose cleanup the Runtime then confirmed: a definite preparation failure. */
const cleanupConfirmed = (s: TurnState, code: ErrorCodes.PreparationErrorCode): TurnState =>
  settleFailed(
    { ...s, cleanupPending: undefined },
    { error_code: "preparation_failed", preparation_error_code: code, detail: "cleanup_confirmed" },
    new PreparationFailed({ state: "failed", code })
  )

const onPreparation = (s: TurnState, status: Preparation.PreparationStatusPayload): TurnState => {
  const applied = Preparation.applyRevision(s.prepCursor, status)
  if (!applied.apply) return s
  const next: TurnState = { ...s, prepCursor: applied.cursor, prepSeen: s.prepSeen || status.state !== "rejected" }
  if (!isPending(next)) return next
  const code = status.error_code
  switch (status.state) {
    case "starting":
    case "started":
      return { ...next, runEvidence: true }
    case "rejected": {
      const operation = status.operation ?? "execution_prepare"
      const rejectedCode = code ?? "invalid_request"
      if (operation === "execution_release") return next
      const error = new PreparationRejected({ operation, code: rejectedCode })
      if (operation === "execution_prepare" && ErrorCodes.isRetrySafePreparationCode(rejectedCode) && !next.startSent) {
        return { ...next, resolution: { _tag: "Unclaimed", reason: "preparation_capacity", error } }
      }
      return settleFailed(
        next,
        { error_code: "preparation_rejected", preparation_error_code: rejectedCode, preparation_operation: operation },
        error
      )
    }
    case "failed":
      // Cleanup not confirmed: the Runtime keeps ownership and retries; wait for the confirmed release.
      if (code !== undefined && isCleanupUnconfirmed(code)) return { ...next, cleanupPending: code }
      return settleFailed(
        next,
        { error_code: "preparation_failed", ...(code === undefined ? {} : { preparation_error_code: code }) },
        new PreparationFailed({ state: status.state, ...(code === undefined ? {} : { code }) })
      )
    case "released":
      if (next.cleanupPending !== undefined) return cleanupConfirmed(next, next.cleanupPending)
      return settleFailed(
        next,
        { error_code: "preparation_failed", ...(code === undefined ? {} : { preparation_error_code: code }) },
        new PreparationFailed({ state: status.state, ...(code === undefined ? {} : { code }) })
      )
    case "expired":
      if (next.cleanupPending !== undefined) return cleanupConfirmed(next, next.cleanupPending)
      return settleFailed(next, { error_code: "preparation_expired" }, new PreparationFailed({ state: "expired" }))
    default:
      return next
  }
}

const onRunEvent = (s0: TurnState, event: RunEvent): TurnState => {
  const s = s0.runEvidence ? s0 : { ...s0, runEvidence: true }
  switch (event.type) {
    case "usage":
      // A cumulative snapshot replaces the previous one; after settlement it only fills an unknown usage.
      return isPending(s) ? { ...s, usage: event.payload } : refresh(s.usage === undefined ? { ...s, usage: event.payload } : s)
    case "error": {
      const engine = event.payload.code === undefined
        ? undefined
        : { code: event.payload.code, httpStatus: event.payload.http_status }
      const next: TurnState = {
        ...s,
        engine,
        errorText: event.payload.error,
        problem: isPending(s) ? (s.problem ?? { code: "engine_failed" }) : s.problem
      }
      return isPending(s) ? next : refresh(next)
    }
    case "done": {
      const payload = event.payload
      if (!isPending(s)) {
        // Evidence after settlement (journal draining): fill only what is still unknown.
        return refresh({
          ...s,
          done: s.done ?? payload,
          continuity: fillContinuity(s.continuity, continuityOf(payload)),
          usage: s.usage ?? payload.usage
        })
      }
      return settleFromDone({
        ...s,
        done: payload,
        continuity: { ...s.continuity, ...continuityOf(payload) },
        usage: payload.usage ?? s.usage
      })
    }
    default:
      return s
  }
}

const onCancelReceipt = (s: TurnState, deliveryId: string, ack: Interaction.InteractionDecisionAckPayload): TurnState => {
  const cancel: CancelState = { phase: "resolved", delivery_id: deliveryId }
  const outcome = ack.outcome
  if (!isPending(s)) {
    if (!ack.applied || outcome === undefined) return { ...s, cancel }
    return refresh({
      ...s,
      cancel,
      continuity: fillContinuity(s.continuity, continuityOf(outcome)),
      usage: s.usage ?? outcome.usage
    })
  }
  if (ack.applied) {
    // The receipt owns the terminal outcome: its continuity snapshot is authoritative over earlier frames.
    const continuity: Continuity = outcome === undefined ? s.continuity : fillContinuity(continuityOf(outcome), s.continuity)
    const base: TurnState = { ...s, cancel, continuity, usage: outcome?.usage ?? s.usage }
    return settleOk(base, { status: "cancelled", cancel_delivery_id: deliveryId })
  }
  const code = ack.error_code as ErrorCodes.CancelErrorCode | undefined
  if (code === "run_inactive" && s.done !== undefined) {
    // The Run had already completed; the done decides.
    return settleFromDone({ ...s, cancel })
  }
  const ids = { run_id: s.runId, delivery_id: deliveryId }
  return settleFailed(
    { ...s, cancel },
    { error_code: "cancel_unconfirmed", cancel_delivery_id: deliveryId, ...(code === undefined ? {} : { cancel_error_code: code }) },
    code === "cancel_failed"
      ? new CancelFailed({ ...ids, code })
      : new CancelUnconfirmed({ ...ids, reason: "not_applied", ...(code === undefined ? {} : { code }) })
  )
}

const onDispatched = (s: TurnState, fact: Extract<TurnFact, { _tag: "Dispatched" }>): TurnState => {
  switch (fact.type) {
    case "execution_prepare":
      return { ...s, prepareSent: true }
    case "execution_start":
      return { ...s, startSent: true }
    case "prompt_request":
      return { ...s, directSent: true }
    case "prompt_cancel":
      // Without a delivery id it is a best-effort abort with no receipt: it owns nothing.
      if (fact.delivery_id === undefined || !isPending(s) || s.cancel !== undefined) return s
      return { ...s, cancel: { phase: "pending", delivery_id: fact.delivery_id } }
    case "prompt_steer": {
      if (fact.input_id === undefined || s.inputs.has(fact.input_id)) return s
      const inputs = new Map(s.inputs)
      inputs.set(fact.input_id, "sent")
      return { ...s, inputs }
    }
    default:
      return s
  }
}

/** Applies one fact. Pure; facts after settlement only add evidence and never change status or error_code. */
export const step = (s: TurnState, fact: TurnFact): TurnState => {
  switch (fact._tag) {
    case "AdmissionRejected": {
      if (!isPending(s)) return s
      switch (fact.rejection) {
        case "capabilities_undeclared":
        case "harness_unavailable":
          return { ...s, resolution: { _tag: "Unclaimed", reason: fact.rejection, error: fact.error } }
        default:
          return settleFailed(s, { error_code: fact.rejection, detail: fact.detail }, fact.error)
      }
    }
    case "Dispatching":
      switch (fact.type) {
        case "execution_prepare":
          return { ...s, prepareMaybeSent: true }
        case "execution_start":
        case "prompt_request":
          return { ...s, runMaybeSent: true }
        default:
          return s
      }
    case "Dispatched":
      return onDispatched(s, fact)
    case "NotDispatched": {
      if (!isPending(s)) return s
      if (fact.type === "execution_prepare" || fact.type === "execution_start" || fact.type === "prompt_request") {
        return settleFailed(s, { error_code: "delivery_failed", detail: fact.reason }, new DeliveryRefused({ run_id: s.runId, reason: fact.reason }))
      }
      return s
    }
    case "PreparationStatus":
      return onPreparation(s, fact.status)
    case "PreparationObservationEnded":
      // After start was (or may have been) sent the Run subscription decides.
      return s.startSent || s.runMaybeSent ? s : observationEnded(s, fact.reason)
    case "RunEvent":
      return onRunEvent(s, fact.event)
    case "RunObservationEnded":
      // A malformed frame naming the Run was still sent by the Runtime for this Run: it proves delivery, as
      // `started` does, whichever subscription's fact was recorded first.
      return observationEnded(fact.reason === "invalid_run_frame" ? { ...s, runEvidence: true } : s, fact.reason)
    case "CancelReceipt":
      return onCancelReceipt(s, fact.delivery_id, fact.ack)
    case "CancelUnconfirmed": {
      const cancel: CancelState = { phase: "resolved", delivery_id: fact.delivery_id }
      if (!isPending(s)) return { ...s, cancel }
      return settleFailed(
        { ...s, cancel },
        { error_code: "cancel_unconfirmed", cancel_delivery_id: fact.delivery_id },
        new CancelUnconfirmed({ run_id: s.runId, delivery_id: fact.delivery_id, reason: fact.reason })
      )
    }
    case "InputWritten": {
      if (!s.inputs.has(fact.input_id)) return s
      const inputs = new Map(s.inputs)
      inputs.set(fact.input_id, "written")
      return { ...s, inputs }
    }
    case "InputAccepted":
    case "InputRejected": {
      if (!s.inputs.has(fact.input_id)) return s
      const inputs = new Map(s.inputs)
      inputs.delete(fact.input_id)
      return settleFromDone({ ...s, inputs })
    }
    case "InputUnknown":
      if (!s.inputs.has(fact.input_id) || !isPending(s)) return s
      return settleFromDone(inputUnknown(s, fact.input_id))
    case "Abandoned":
      if (!isPending(s) || s.startSent) return { ...s, abandoned: true }
      return settleOk({ ...s, abandoned: true }, { status: "cancelled" })
  }
}

/** The resolution the facts so far establish. */
export const resolve = (s: TurnState): TurnResolution => s.resolution

/** True when nothing else can change the status (the Turn settled or stays unclaimed). */
export const isResolved = (s: TurnState): boolean => s.resolution._tag !== "Pending"

/** Whether a cancellation or an in-flight input still holds the settlement. */
export const awaiting = (s: TurnState): { readonly cancel: boolean; readonly inputs: ReadonlyArray<string> } => ({
  cancel: s.cancel?.phase === "pending",
  inputs: [...s.inputs.keys()]
})

/** Folds the journal of the Turn of `runId` (delivery and restart replay use this one projection). */
export const project = (runId: string, facts: Iterable<TurnFact>): TurnResolution => {
  let s = initial(runId)
  for (const fact of facts) s = step(s, fact)
  return s.resolution
}
