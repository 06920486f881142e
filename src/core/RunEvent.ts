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

/**
 * What a malformed frame of each Run family does (docs/wire-decisions.md G14; the header of DeviceSession.ts).
 * `end`: the Run's observer fails with `invalid_run_frame` — content, the terminal frames and the requests Core
 * must answer are lost, so the stream is incomplete (the Turn ends `event_stream_incomplete`: the frame proves
 * the Run received its input, and the Run gets a best-effort abort). `drop`: dropped with a bounded log line —
 * a later frame supersedes it (`usage` is a cumulative snapshot; `done` carries the final one), it is
 * observational metadata (`subagent_*`), or the Runtime enforces it natively (`permission_cancel`: an answer
 * to the withdrawn request gets its own receipt).
 */
export const malformedRunFrame: { readonly [K in RunEvent["type"]]: "end" | "drop" } = {
  delta: "end",
  thinking: "end",
  output_message: "end",
  tool_call: "end",
  error: "end",
  done: "end",
  permission_request: "end",
  prompt_for_user_choice: "end",
  function_call: "end",
  usage: "drop",
  permission_cancel: "drop",
  subagent_identity: "drop",
  subagent_lifecycle: "drop",
  subagent_turn: "drop",
  subagent_item: "drop",
  subagent_coordination: "drop"
}
