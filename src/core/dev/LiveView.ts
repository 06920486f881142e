/**
 * The demo's readable live view of the exchange: one line per frame, in order, with the time since the
 * start, a direction arrow (`→` Core to Runtime, `←` Runtime to Core), the type, the envelope id and a short
 * summary. Pure formatting over `FrameTap.TappedFrame`.
 *
 * Never shown: credentials, `agent_options`, MCP bearer tokens, error texts, decision messages, or any
 * payload member not named below. Text the peer sent (deltas, titles) is bounded and reduced to printable
 * characters.
 */
import type { Messages } from "../../proto/index.js"
import { Capabilities } from "../../proto/index.js"
import type { TappedFrame } from "../FrameTap.js"

/** A bounded, printable quotation of peer text. */
export const quote = (text: string, max = 48): string => {
  const clipped = text.length > max ? text.slice(0, max) : text
  const printable = clipped.replace(/\n/g, "⏎").replace(/[\u0000-\u001f\u007f]/g, "·")
  return `"${printable}${text.length > max ? "…" : ""}"`
}

const shortId = (id: string | undefined): string => {
  if (id === undefined) return ""
  return id.length > 22 ? `${id.slice(0, 21)}…` : id
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

type Usage = Messages.MessageOfType<"usage">["payload"]

/** A cumulative usage snapshot in a few words (absent measurements stay absent). */
export const usageSummary = (usage: Usage | undefined): string => {
  if (usage === undefined) return "usage unknown"
  const parts: Array<string> = []
  if (usage.tokens !== undefined) {
    parts.push(`tokens in ${usage.tokens.input_tokens} / out ${usage.tokens.output_tokens} / total ${usage.tokens.total_tokens}`)
  } else {
    if (usage.input_tokens !== undefined) parts.push(`in ${usage.input_tokens}`)
    if (usage.output_tokens !== undefined) parts.push(`out ${usage.output_tokens}`)
  }
  if (usage.cost_usd !== undefined) parts.push(`$${usage.cost_usd}`)
  return parts.length === 0 ? "usage (no measurement)" : `usage ${parts.join(" · ")}`
}

/** The summary of one message; never includes secret-bearing members. */
export const summarize = (message: Messages.Message): string => {
  switch (message.type) {
    case "heartbeat": {
      const kinds = message.payload.supported_agent_kinds ?? []
      const described = kinds.map((k) =>
        `${k.kind}${k.version === undefined ? "" : ` ${k.version}`} ${k.available ? "available" : "unavailable"} (${
          Capabilities.supportedNames(k.capabilities).length
        }/${Capabilities.capabilityNames.length} capabilities)`
      )
      return `${described.length === 0 ? "no kinds" : described.join(", ")} · ${message.payload.active_requests} active`
    }
    case "execution_prepare":
      return `session ${shortId(message.payload.session_id)} · kind ${message.payload.configuration.agent_kind}`
    case "preparation_status": {
      const s = message.payload
      return [
        s.state,
        s.state === "rejected" ? `${s.operation ?? ""} ${s.error_code ?? ""}`.trim() : `rev ${s.revision}`,
        s.error_code !== undefined && s.state !== "rejected" ? s.error_code : undefined,
        s.state === "ready" && s.executor_id !== undefined ? `executor ${shortId(s.executor_id)}` : undefined
      ].filter((x) => x !== undefined).join(" · ")
    }
    case "execution_start":
      return `run ${shortId(message.payload.run_id)} · ${plural(message.payload.input.length, "message")}`
    case "execution_release":
      return `handle ${shortId(message.payload.handle)}`
    case "prompt_request":
      return `kind ${message.payload.agent_kind} · ${plural(message.payload.input?.length ?? 0, "message")}`
    case "prompt_cancel":
      return message.payload.delivery_id === undefined ? "best-effort abort" : `delivery ${shortId(message.payload.delivery_id)}`
    case "device_shutdown":
      return ""
    case "delta":
      return `#${message.payload.sequence} ${quote(message.payload.delta)}`
    case "thinking":
      return quote(message.payload.text)
    case "output_message":
      return `${message.payload.id} ${message.payload.status}`
    case "tool_call":
      return `${message.payload.name} ${message.payload.stage}`
    case "usage":
      return usageSummary(message.payload)
    case "error":
      return [
        "execution error",
        message.payload.code,
        message.payload.http_status === undefined ? undefined : `http ${message.payload.http_status}`
      ].filter((x) => x !== undefined).join(" · ")
    case "done":
      return `content ${plural(message.payload.content.length, "char")} · ${usageSummary(message.payload.usage)}`
    case "prompt_steer":
      return `input ${shortId(message.payload.input_id)} · ${plural(message.payload.input.length, "message")}`
    case "prompt_steer_ack": {
      const a = message.payload
      const phase = a.accepted ? "accepted" : a.error_code !== undefined ? `error ${a.error_code}` : a.written === true ? "written" : "pending"
      return `input ${shortId(a.input_id)}: ${phase}`
    }
    case "interaction_decision_ack":
      return `delivery ${shortId(message.payload.delivery_id)}: ${
        message.payload.applied ? "applied" : `not applied${message.payload.error_code === undefined ? "" : ` (${message.payload.error_code})`}`
      }`
    case "permission_request":
      return `${shortId(message.payload.request_id)} ${message.payload.tool}: ${quote(message.payload.title)}`
    case "permission_cancel":
      return "withdrawn"
    case "permission_decision":
      return message.payload.approved ? "approved" : "denied"
    case "prompt_for_user_choice":
      return `${shortId(message.payload.ask_id)} · ${plural(message.payload.questions.length, "question")}`
    case "prompt_for_user_choice_decision":
      return message.payload.cancelled === true ? "cancelled" : plural(message.payload.question_answers?.length ?? 0, "answer")
    case "function_call":
      return `${shortId(message.payload.call_id)} ${message.payload.name}`
    case "function_result":
      return `${shortId(message.payload.call_id)} ${message.payload.success ? "success" : "failure"}`
    default:
      return ""
  }
}

/** One live-view line for a tapped frame; `startMs` is the demo's start (Core's clock). */
export const formatFrame = (frame: TappedFrame, startMs: number): string => {
  const elapsed = `+${((frame.at - startMs) / 1000).toFixed(3)}s`.padStart(9)
  const arrow = frame.direction === "core→runtime" ? "→" : "←"
  const type = frame.type.padEnd(22)
  const id = shortId(frame.id).padEnd(23)
  const summary = frame.message === undefined ? `invalid frame (${frame.invalid ?? "unknown"}, ${frame.bytes} bytes)` : summarize(frame.message)
  return `${elapsed}  ${arrow} ${type} ${id} ${summary}`.trimEnd()
}
