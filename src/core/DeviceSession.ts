/**
 * One authenticated Runtime connection as Core's callers see it (protocol "Ownership and connection",
 * "Failures, retries and cleanup"). The gateway builds one per physical connection; a newer connection for
 * the same device replaces it, and the old session's observers end with `ObservationLost("replaced")`.
 *
 * Malformed-frame rule for this direction (Runtime → Core): an invalid heartbeat clears the admission snapshot
 * and closes the transport; a frame that fails decoding but names a Run or reply we observe fails that
 * observer with `ObservationLost("invalid_frame")` (its stream is incomplete); any other invalid frame is
 * dropped with a log line carrying code, type, id and size, never the payload.
 *
 * This file declares the contract; the implementation (`make`) follows it below the types.
 */
import type { Effect, Option, Scope, Stream } from "effect"
import type { Capabilities, Ids, Messages } from "../proto/index.js"
import type { NotSent, ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"

/** The latest valid declaration of a connection. Kinds missing from it are not advertised. */
export interface Declaration {
  readonly kinds: ReadonlyMap<string, Capabilities.AgentKindDescriptor>
  readonly daemonVersion: string | undefined
  readonly activeRequests: number
  /** The heartbeat's own `ts` (sender clock, Unix seconds). */
  readonly ts: number
  /** Core's clock (Unix ms) when the heartbeat arrived. */
  readonly receivedAtMs: number
}

/** Frames routed to a Run's subscriber (Envelope.id = Run id, or an interaction id Core maps to its Run). */
export type RunEvent = Extract<
  Messages.RuntimeToCore,
  {
    readonly type:
      | "delta"
      | "thinking"
      | "output_message"
      | "tool_call"
      | "usage"
      | "error"
      | "done"
      | "permission_request"
      | "permission_cancel"
      | "prompt_for_user_choice"
      | "function_call"
      | "subagent_identity"
      | "subagent_lifecycle"
      | "subagent_turn"
      | "subagent_item"
      | "subagent_coordination"
  }
>

/** Reply families delivered through the one Correlator, with the key each is correlated by. */
export interface ReplyFamilies {
  /** key: delivery_id (the envelope id must also be the expected interaction or Run id; checked by the caller). */
  readonly interaction_decision_ack: Messages.MessageOfType<"interaction_decision_ack">
  /** key: `${runId}\u0000${input_id}`; several receipts per input (written, then accepted). */
  readonly prompt_steer_ack: Messages.MessageOfType<"prompt_steer_ack">
  /** key: transfer id; one receipt per step. */
  readonly runtime_prepare_result: Messages.MessageOfType<"runtime_prepare_result">
  /** key: operation id. */
  readonly workspace_read_result: Messages.MessageOfType<"workspace_read_result">
  readonly workspace_write_result: Messages.MessageOfType<"workspace_write_result">
  readonly workspace_export_result: Messages.MessageOfType<"workspace_export_result">
  readonly environment_quiesced: Messages.MessageOfType<"environment_quiesced">
  readonly environment_resumed: Messages.MessageOfType<"environment_resumed">
}
export type ReplyFamily = keyof ReplyFamilies

/** The correlation key of a steer receipt. */
export const steerAckKey = (runId: Ids.RunId, inputId: string): string => `${runId}\u0000${inputId}`

export interface DeviceSession {
  readonly deviceId: Ids.DeviceId
  /** Gateway-wide, monotonically increasing number of this physical connection. */
  readonly connectionNumber: number
  /**
   * Puts one envelope in this connection's bounded send queue. Success proves only that the envelope entered
   * the local queue: not that it was written, received, accepted or applied. Fails with `NotSent` (definite:
   * nothing will be sent) when the queue is full or closed, or the message is invalid or over 4 MiB.
   */
  readonly send: (message: Messages.CoreToRuntime) => Effect.Effect<void, NotSent>
  /** The latest valid declaration; `None` before the first heartbeat (capabilities unknown, nothing admitted). */
  readonly declaration: Effect.Effect<Option.Option<Declaration>>
  /**
   * The only Run subscription entry point. Register before sending the request that can produce the Run's
   * frames. The stream ends successfully after `done`, or fails with `ObservationLost` (disconnection,
   * replacement) or `SubscriberOverflow`; it never fabricates an error or a done. Closing the scope
   * unsubscribes (observer cancellation settles nothing).
   */
  readonly subscribeDurable: (
    runId: Ids.RunId
  ) => Effect.Effect<Stream.Stream<RunEvent, ObservationLost | SubscriberOverflow>, SubscriptionRejected, Scope.Scope>
  /**
   * Preparation statuses of one request id, with the per-handle revision rule applied (older, repeated and
   * foreign-handle statuses dropped; `rejected` passes through). Ends after a terminal state (started,
   * released, expired, failed); fails with `ObservationLost` or `SubscriberOverflow` (16 buffered).
   */
  readonly subscribePreparation: (
    requestId: Ids.PreparationRequestId
  ) => Effect.Effect<
    Stream.Stream<Messages.MessageOfType<"preparation_status">["payload"], ObservationLost | SubscriberOverflow>,
    SubscriptionRejected,
    Scope.Scope
  >
  /**
   * Registers for the replies of one correlated family and key before sending. A duplicate pending key is
   * rejected (no transport-wide deduplication). The stream fails with `ObservationLost` when the connection
   * ends; a reply without the required correlation never reaches it.
   */
  readonly expectReplies: <F extends ReplyFamily>(
    family: F,
    key: string
  ) => Effect.Effect<Stream.Stream<ReplyFamilies[F], ObservationLost | SubscriberOverflow>, SubscriptionRejected, Scope.Scope>
  /** Completes with the reason when this connection ends (it settles no execution). */
  readonly closed: Effect.Effect<ObservationLost>
  /** Closes the transport with a close code. Settles no execution and sends no synthetic events. */
  readonly close: (code: number, reason: ObservationLost["reason"]) => Effect.Effect<void>
}
