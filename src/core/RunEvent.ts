/**
 * The frames Core routes to a Run's subscriber: Envelope.id = Run id, except `permission_cancel`, whose id is an
 * interaction id the session maps back to its Run. Listed once; the session's router, the outcome projection
 * and the dev Core's journal all use this list.
 */
import type { Messages } from "../proto/index.js"

export const runEventTypes = [
  "delta",
  "thinking",
  "output_message",
  "tool_call",
  "usage",
  "error",
  "done",
  "permission_request",
  "permission_cancel",
  "prompt_for_user_choice",
  "function_call",
  "subagent_identity",
  "subagent_lifecycle",
  "subagent_turn",
  "subagent_item",
  "subagent_coordination"
] as const satisfies ReadonlyArray<Messages.RuntimeToCoreType>

/** A frame routed to a Run's subscriber. */
export type RunEvent = Extract<Messages.RuntimeToCore, { readonly type: (typeof runEventTypes)[number] }>

const runEventTypeSet: ReadonlySet<string> = new Set(runEventTypes)

/** True for the frame types a Run's subscriber receives. */
export const isRunEventType = (type: string): type is RunEvent["type"] => runEventTypeSet.has(type)

/** True for a frame a Run's subscriber receives. */
export const isRunEvent = (message: Messages.RuntimeToCore): message is RunEvent => runEventTypeSet.has(message.type)
