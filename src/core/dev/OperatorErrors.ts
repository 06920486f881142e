/**
 * Errors of the dev Core's operator operations, each with the HTTP status the operator API answers. Every
 * one of them is definite and happened before anything was sent to a Runtime: an operation that dispatched
 * something answers 200 with a body that says what is proven (docs/operator-api.md), never an error.
 */
import { Schema } from "effect"

/** The request is malformed (bad JSON, a schema violation, an invalid MessageInput). 400. */
export class OperatorRequestInvalid extends Schema.TaggedError<OperatorRequestInvalid>()("OperatorRequestInvalid", {
  detail: Schema.String
}) {
  override get message() {
    return `invalid request: ${this.detail}`
  }
}

/** No such device, Session, Turn or interaction. 404. */
export class OperatorNotFound extends Schema.TaggedError<OperatorNotFound>()("OperatorNotFound", {
  resource: Schema.Literals(["device", "session", "turn", "interaction", "write"]),
  id: Schema.String
}) {
  override get message() {
    return `${this.resource} not found`
  }
}

/** The resource is not in a state that allows the operation (a finished Turn, an answered interaction, …). 409. */
export class OperatorConflict extends Schema.TaggedError<OperatorConflict>()("OperatorConflict", {
  reason: Schema.Literals([
    "turn_not_running",
    "initialization_failed", // the Session's environment initialization failed: its Turns never run
    "initialization_unknown", // its outcome is unknown (never replayed): its Turns never run
    "turn_active", // the Session already has an unfinished Turn
    "interaction_not_pending",
    "device_offline",
    "device_mismatch", // the Session is bound to another device
    "answer_outstanding", // another answer of this Turn is still awaiting its receipt
    "session_busy", // a Files operation holds the Session's scheduling reservation
    "turn_starting", // the Session's Turn is queued or preparing: no Run to read from yet
    "write_unsettled", // an earlier write of the Session has no exact settlement (kept across restarts)
    "write_not_unknown", // an operator settlement names a write that is not unknown (settled, or still in flight)
    "no_workspace", // the Session's Environment is type none: there is no workspace to read or write
    "suspension_unsettled", // the device's latest suspension attempt is not settled (resume it first)
    "not_suspended" // the device has no suspension a resume could name
  ]),
  detail: Schema.String
}) {
  override get message() {
    return `conflict (${this.reason}): ${this.detail}`
  }
}

/** The store failed; nothing was decided. 500. */
export class OperatorUnavailable extends Schema.TaggedError<OperatorUnavailable>()("OperatorUnavailable", {
  operation: Schema.String
}) {
  override get message() {
    return `internal error (${this.operation})`
  }
}
