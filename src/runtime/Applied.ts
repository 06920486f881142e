/**
 * What the decision families share (reference part 2 §3–§4): the applied-decision replay store of one
 * connection, a per-key lock, the ack code of a guarded native submission, and the bounded
 * `interaction_decision_ack` send. The store is a per-connection service used by Interactions and Functions.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Semaphore } from "effect"
import type { DecisionErrorCode, FunctionResultErrorCode } from "../proto/ErrorCodes.js"
import type { AckSubjectId, DeliveryId } from "../proto/Ids.js"
import { MaxAppliedDecisionRecords, ReceiptSendBudget } from "../proto/Limits.js"
import type { CapabilityUnsupported, ContractViolation, SubmitError } from "./harness/Harness.js"
import { type OutboundShape, withTrace } from "./Outbound.js"

// ---------------------------------------------------------------------------------------------- replay store

const AppliedRecordTtl = Duration.hours(1)

/** Applied decisions and function results of one connection, for the replay rule. */
export interface AppliedStore {
  readonly lookup: (key: string) => Option.Option<string>
  readonly remember: (key: string, fingerprint: string) => Effect.Effect<void>
}

export const makeAppliedStore = (capacity: number = MaxAppliedDecisionRecords): AppliedStore => {
  const records = new Map<string, { readonly fingerprint: string; readonly at: number }>()
  return {
    lookup: (key) => Option.map(Option.fromNullishOr(records.get(key)), (r) => r.fingerprint),
    remember: (key, fingerprint) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        records.delete(key)
        if (records.size >= capacity) {
          const cutoff = now - Duration.toMillis(AppliedRecordTtl)
          for (const [k, r] of records) if (r.at < cutoff) records.delete(k)
          // Still full: evict the oldest (Map iteration follows insertion order).
          while (records.size >= capacity) {
            const oldest = records.keys().next()
            if (oldest.done === true) break
            records.delete(oldest.value)
          }
        }
        records.set(key, { fingerprint, at: now })
      })
  }
}

/** Serializes work per key; locks are dropped when nobody holds or waits for them. */
export const makeKeyedLock = () => {
  const locks = new Map<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
  return <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = locks.get(key)
      if (lock === undefined) {
        lock = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
        locks.set(key, lock)
      }
      const held = lock
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (--held.users === 0) locks.delete(key)
        }))
      )
    })
}

/** The ack code of a guarded native submission failure. */
export const submitErrorCode = (
  error: SubmitError | CapabilityUnsupported | ContractViolation
): "not_pending" | "not_ready" | "unsupported" | "contract_violation" | "runtime_error" => {
  switch (error._tag) {
    case "NotPending":
      return "not_pending"
    case "NotReady":
      return "not_ready"
    case "CapabilityUnsupported":
      return "unsupported"
    case "ContractViolation":
    case "OperationUnsupported":
      return "contract_violation"
    case "NativeFailed":
      return "runtime_error"
  }
}

/** Sends one `interaction_decision_ack` with its own 5 s budget. */
export const sendAck = (
  outbound: OutboundShape,
  subject: AckSubjectId,
  deliveryId: DeliveryId,
  trace: string | undefined,
  code: DecisionErrorCode | FunctionResultErrorCode | undefined
) =>
  outbound.sendWithin(
    withTrace({
      type: "interaction_decision_ack",
      id: subject,
      payload: code === undefined
        ? { delivery_id: deliveryId, applied: true }
        : { delivery_id: deliveryId, applied: false, error_code: code }
    }, trace),
    ReceiptSendBudget
  )

/** The applied decisions and function results of one connection (replay rule). */
export class AppliedDecisions extends Context.Service<AppliedDecisions, AppliedStore>()("agentwire/runtime/AppliedDecisions") {
  static readonly layer = Layer.sync(AppliedDecisions, () => makeAppliedStore())
}
