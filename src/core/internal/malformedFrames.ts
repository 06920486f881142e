/**
 * The per-family part of the malformed-frame policy (the table in the header of `DeviceSession.ts`;
 * docs/wire-decisions.md G14): which observer an invalid frame fails, if any. Runs on the read loop.
 */
import type { Envelope } from "../../proto/index.js"
import { ObservationLost } from "../Errors.js"
import { type ReplyKeyedById, replyTypesKeyedById } from "../ReplyFamilies.js"
import { isRunEventType, malformedRunFrame } from "../RunEvent.js"
import type { SessionState } from "../SessionServices.js"

const invalidFrame = new ObservationLost({ reason: "invalid_frame" })
const invalidRunFrame = new ObservationLost({ reason: "invalid_run_frame" })

/** Fails the observer the invalid frame names under the policy; true when one failed (else it is dropped). */
export const failNamedObserver = (
  { preparations, replies, runs }: Pick<SessionState, "runs" | "preparations" | "replies">,
  error: Envelope.InvalidFrame
): boolean => {
  const { id, type } = error
  if (type === undefined || id === undefined) return false
  if (isRunEventType(type)) return malformedRunFrame[type] === "end" && runs.failFrame(type, id, invalidRunFrame)
  if (type === "preparation_status") return preparations.fail(id, invalidFrame)
  if (replyTypesKeyedById.has(type)) return replies.failKey(type as ReplyKeyedById, id, invalidFrame)
  if (type === "prompt_steer_ack") {
    const prefix = `${id}\u0000`
    return replies.failWhere("prompt_steer_ack", (key) => key.startsWith(prefix), invalidFrame) > 0
  }
  return false
}
