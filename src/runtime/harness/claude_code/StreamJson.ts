/**
 * Claude Code's stream-json protocol (reference harnesses.md §3.2–§3.3, observed on 2.1.332): decoding of the
 * stdout lines the adapter relies on into a small typed union, checked structurally field by field (no prose
 * is ever parsed), and the stdin lines it writes. A line that is not JSON, or a message type the adapter does
 * not use, decodes to `Other` and is ignored. Nothing here performs I/O.
 */
import type { JsonObject as JsonObjectSchema } from "../../../proto/Checks.js"
import type { InputContent, MessageInput } from "../../../proto/MessageInput.js"

/** A JSON object as JSON.parse produced it (its values are JSON by construction). */
export type Json = typeof JsonObjectSchema.Type

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)
const num = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)
const strings = (u: unknown): ReadonlyArray<string> =>
  Array.isArray(u) ? u.filter((x): x is string => typeof x === "string") : []

export interface ContentBlock {
  readonly type: string
  readonly text?: string | undefined
  readonly id?: string | undefined
  readonly name?: string | undefined
  readonly input?: Json | undefined
  readonly tool_use_id?: string | undefined
  readonly is_error?: boolean | undefined
  readonly content?: unknown
}

export type NativeMessage =
  | { readonly type: "control_response"; readonly requestId: string; readonly ok: boolean; readonly response: Json }
  | {
    readonly type: "can_use_tool"
    readonly requestId: string
    readonly toolName: string
    readonly input: Json
    readonly toolUseId: string | undefined
    readonly description: string | undefined
  }
  | { readonly type: "control_cancel_request"; readonly requestId: string }
  /** A JSON-RPC message for an SDK MCP server we host (`initialize.sdkMcpServers`), to be answered in the response. */
  | { readonly type: "mcp_message"; readonly requestId: string; readonly serverName: string; readonly message: Json }
  | { readonly type: "command_lifecycle"; readonly uuid: string; readonly state: string }
  | {
    readonly type: "init"
    readonly sessionId: string
    readonly capabilities: ReadonlyArray<string>
    readonly tools: ReadonlyArray<string>
    readonly model: string | undefined
    readonly consumed: ReadonlyArray<string>
  }
  | { readonly type: "status"; readonly consumed: ReadonlyArray<string> }
  | { readonly type: "stream_event"; readonly event: Json; readonly consumed: ReadonlyArray<string> }
  | {
    readonly type: "assistant"
    readonly messageId: string | undefined
    readonly content: ReadonlyArray<ContentBlock>
    readonly error: string | undefined
    readonly aborted: boolean
    readonly consumed: ReadonlyArray<string>
  }
  | { readonly type: "user"; readonly content: ReadonlyArray<ContentBlock> }
  | {
    readonly type: "result"
    readonly isError: boolean
    readonly subtype: string | undefined
    readonly sessionId: string | undefined
    readonly apiErrorStatus: number | undefined
    readonly apiErrorType: string | undefined
    readonly terminalReason: string | undefined
    /** Per model, since the previous result (all calls, sub-agents included). */
    readonly usageSinceLast: Json | undefined
    readonly consumed: ReadonlyArray<string>
  }
  | { readonly type: "other" }

const other: NativeMessage = { type: "other" }

const blocks = (u: unknown): ReadonlyArray<ContentBlock> =>
  Array.isArray(u)
    ? u.flatMap((b) =>
      isObject(b) && typeof b.type === "string"
        ? [{
          type: b.type,
          text: str(b.text),
          id: str(b.id),
          name: str(b.name),
          input: isObject(b.input) ? b.input : undefined,
          tool_use_id: str(b.tool_use_id),
          is_error: typeof b.is_error === "boolean" ? b.is_error : undefined,
          content: b.content
        }]
        : []
    )
    : []

/** Uuids of our user messages that a frame says it consumed (only top-level frames count). */
const consumedBy = (m: Json): ReadonlyArray<string> =>
  m.parent_tool_use_id === null || m.parent_tool_use_id === undefined ? strings(m.user_message_uuids) : []

/** Decodes one stdout line. */
export const decodeLine = (line: string): NativeMessage => {
  let m: unknown
  try {
    m = JSON.parse(line)
  } catch {
    return other
  }
  if (!isObject(m)) return other
  switch (m.type) {
    case "control_response": {
      const r = m.response
      if (!isObject(r)) return other
      const requestId = str(r.request_id)
      if (requestId === undefined) return other
      return { type: "control_response", requestId, ok: r.subtype === "success", response: isObject(r.response) ? r.response : {} }
    }
    case "control_request": {
      const requestId = str(m.request_id)
      const r = m.request
      if (requestId !== undefined && isObject(r) && r.subtype === "mcp_message") {
        const serverName = str(r.server_name)
        return serverName === undefined || !isObject(r.message) ? other : { type: "mcp_message", requestId, serverName, message: r.message }
      }
      if (requestId === undefined || !isObject(r) || r.subtype !== "can_use_tool") return other
      const toolName = str(r.tool_name)
      if (toolName === undefined) return other
      return {
        type: "can_use_tool",
        requestId,
        toolName,
        input: isObject(r.input) ? r.input : {},
        toolUseId: str(r.tool_use_id),
        description: str(r.description)
      }
    }
    case "control_cancel_request": {
      const requestId = str(m.request_id)
      return requestId === undefined ? other : { type: "control_cancel_request", requestId }
    }
    case "command_lifecycle": {
      const uuid = str(m.command_uuid)
      const state = str(m.state)
      return uuid === undefined || state === undefined ? other : { type: "command_lifecycle", uuid, state }
    }
    case "system": {
      if (m.subtype === "init") {
        const sessionId = str(m.session_id)
        if (sessionId === undefined) return other
        return {
          type: "init",
          sessionId,
          capabilities: strings(m.capabilities),
          tools: strings(m.tools),
          model: str(m.model),
          consumed: consumedBy(m)
        }
      }
      return m.subtype === "status" ? { type: "status", consumed: consumedBy(m) } : other
    }
    case "stream_event":
      if (m.parent_tool_use_id !== null && m.parent_tool_use_id !== undefined) return other
      return isObject(m.event) ? { type: "stream_event", event: m.event, consumed: consumedBy(m) } : other
    case "assistant": {
      if (m.parent_tool_use_id !== null && m.parent_tool_use_id !== undefined) return other
      const message = isObject(m.message) ? m.message : {}
      return {
        type: "assistant",
        messageId: str(message.id),
        content: blocks(message.content),
        error: str(m.error),
        aborted: m.aborted === true,
        consumed: consumedBy(m)
      }
    }
    case "user": {
      if (m.parent_tool_use_id !== null && m.parent_tool_use_id !== undefined) return other
      if (m.isReplay === true) return other
      const message = isObject(m.message) ? m.message : {}
      return { type: "user", content: blocks(message.content) }
    }
    case "result":
      return {
        type: "result",
        isError: m.is_error === true,
        subtype: str(m.subtype),
        sessionId: str(m.session_id),
        apiErrorStatus: num(m.api_error_status),
        apiErrorType: str(m.api_error_type),
        terminalReason: str(m.terminal_reason),
        usageSinceLast: isObject(m.model_usage_since_last_result) ? m.model_usage_since_last_result : undefined,
        consumed: consumedBy(m)
      }
    default:
      return other
  }
}

// ---------------------------------------------------------------------------------------------- stdin lines

export const controlRequest = (requestId: string, request: Json): string =>
  JSON.stringify({ type: "control_request", request_id: requestId, request })

export const controlSuccess = (requestId: string, response: Json): string =>
  JSON.stringify({ type: "control_response", response: { subtype: "success", request_id: requestId, response } })

/** A native image block from a wire image part: a data URL becomes base64, anything else a URL source. */
const imageBlock = (url: string): Json => {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  return match === null
    ? { type: "image", source: { type: "url", url } }
    : { type: "image", source: { type: "base64", media_type: match[1]!, data: match[2]! } }
}

const contentBlock = (part: InputContent): Json =>
  part.type === "input_text" ? { type: "text", text: part.text } : imageBlock(part.image_url)

/** One user message line per wire message, each with its own uuid (the receipt key). */
export const userMessageLine = (uuid: string, content: ReadonlyArray<InputContent>): string =>
  JSON.stringify({
    type: "user",
    uuid,
    session_id: "",
    parent_tool_use_id: null,
    message: { role: "user", content: content.map(contentBlock) }
  })

export const hasImages = (input: MessageInput): boolean =>
  input.some((m) => m.content.some((part) => part.type === "input_image"))
