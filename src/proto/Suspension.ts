/**
 * Suspension fencing (private hosted lifecycle traffic): `environment_quiesce` / `environment_resume` and
 * their replies. Envelope.id is a per-request correlation id echoed by the reply; `suspend_id` fences one
 * persisted suspension attempt across connections. Core keeps at most two outstanding and never replays them.
 */
import { Schema } from "effect"
import { isNonBlank } from "./Checks.js"
import { SuspensionErrorCode } from "./ErrorCodes.js"
import { SuspensionId } from "./Ids.js"

/** Quiesce (rollback must be false) or resume (rollback allows a no-op resume after an uncertain quiesce). */
export const SuspensionRequestPayload = Schema.Struct({
  environment_id: Schema.String.check(isNonBlank),
  suspend_id: SuspensionId,
  rollback: Schema.optionalKey(Schema.Boolean)
})
export type SuspensionRequestPayload = typeof SuspensionRequestPayload.Type

export const SuspensionReplyPayload = Schema.Struct({
  environment_id: Schema.String,
  suspend_id: Schema.String,
  accepted: Schema.Boolean,
  error_code: Schema.optionalKey(SuspensionErrorCode)
}).check(
  Schema.makeFilter((r) => !(r.accepted && r.error_code !== undefined), { expected: "no error_code when accepted" })
)
export type SuspensionReplyPayload = typeof SuspensionReplyPayload.Type

/** A reply matches its request only when both identities echo it exactly. */
export const replyMatches = (request: SuspensionRequestPayload, reply: SuspensionReplyPayload): boolean =>
  reply.environment_id === request.environment_id && reply.suspend_id === request.suspend_id
