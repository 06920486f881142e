/**
 * Errors Core's gateway returns, named by what they prove (style guide §6): `…Rejected` is definite and
 * happened before any effect; `…Unknown` / `ObservationLost` mean dispatched without proof either way.
 * Outcome errors of whole operations (delivery, steering, interactions) live in TurnErrors.ts (re-exported
 * by Outcome.ts).
 */
import { type Cause, Schema } from "effect"

/** Why observation of a connection's replies and Run events ended. None of these is an execution fact. */
export const ObservationLostReason = Schema.Literals([
  "disconnected", // the transport closed or failed
  "replaced", // a newer connection for the same device fenced this one
  "invalid_heartbeat", // the Runtime sent an invalid declaration; Core closed the transport
  "liveness_timeout", // no inbound frame within 60 s
  "invalid_frame", // a frame for this reply or preparation failed decoding, or invalid frames closed the connection
  "invalid_run_frame", // a frame naming this Run failed decoding: the Runtime sent it (the Run exists), the stream is incomplete
  "gateway_shutdown", // Core is shutting down
  "core_restarted" // recorded for Turns that were in flight when Core restarted
])
export type ObservationLostReason = typeof ObservationLostReason.Type

/** Observation ended without a terminal fact. The native effect is unknown; nothing was invented. */
export class ObservationLost extends Schema.TaggedError<ObservationLost>()("ObservationLost", {
  reason: ObservationLostReason
}) {
  override get message() {
    return `observation lost (${this.reason})`
  }
}

/** A subscriber fell behind its bounded buffer; the read loop never waits for it. Events before it were delivered. */
export class SubscriberOverflow extends Schema.TaggedError<SubscriberOverflow>()("SubscriberOverflow", {
  capacity: Schema.Int
}) {
  override get message() {
    return `subscriber overflow (capacity ${this.capacity})`
  }
}

/** The envelope did not enter the send queue (queue full, connection closed, or an invalid message): definite, nothing was sent. */
export class NotSent extends Schema.TaggedError<NotSent>()("NotSent", {
  type: Schema.String,
  reason: Schema.Literals(["queue_full", "connection_closed", "invalid_message", "frame_too_large"])
}) {
  override get message() {
    return `${this.type} not sent (${this.reason})`
  }
}

/** A subscription or waiter could not be registered (duplicate key, capacity): definite, nothing was sent. */
export class SubscriptionRejected extends Schema.TaggedError<SubscriptionRejected>()("SubscriptionRejected", {
  reason: Schema.Literals(["duplicate", "capacity", "connection_closed"])
}) {
  override get message() {
    return `subscription rejected (${this.reason})`
  }
}

/**
 * Why a receipt waiter's queue ended without its receipt: this waiter's own overflow, or the connection (its
 * end, or the queue's end with it).
 */
export const receiptLoss = (e: ObservationLost | SubscriberOverflow | Cause.Done): "receipt_overflow" | "connection_lost" =>
  e._tag === "SubscriberOverflow" ? "receipt_overflow" : "connection_lost"
