/**
 * Pure mappings between Codex and the wire (reference harnesses.md §2.4, §2.10): native user input, usage
 * rebased to the Run, and the neutral tool call / observation of a native tool item.
 */
import type { MessageInput } from "../../../proto/MessageInput.js"
import type { ToolCallPayload, ToolObservation, Usage } from "../../../proto/RunEvents.js"
import type * as P from "./CodexProtocol.js"

/** The native input of a MessageInput: one text input per text part (images are refused before this). */
export const toUserInput = (input: MessageInput) =>
  input.flatMap((message) =>
    message.content.flatMap((part) => (part.type === "input_text" ? [{ type: "text", text: part.text, text_elements: [] }] : []))
  )

/** Usage of this Run: the thread total minus the total before the Run (never negative). */
export const toTokens = (total: P.TokenBreakdown, base: P.TokenBreakdown): Usage => {
  const d = (k: keyof P.TokenBreakdown) => Math.max(0, total[k] - base[k])
  return {
    tokens: {
      input_tokens: d("inputTokens"),
      cached_input_tokens: d("cachedInputTokens"),
      output_tokens: d("outputTokens"),
      reasoning_output_tokens: d("reasoningOutputTokens"),
      total_tokens: d("totalTokens")
    },
    input_tokens: d("inputTokens"),
    output_tokens: d("outputTokens")
  }
}

/** The thread total before the request `last` measured: the baseline of a Turn whose baseline was unknown. */
export const totalBefore = (total: P.TokenBreakdown, last: P.TokenBreakdown): P.TokenBreakdown => ({
  totalTokens: total.totalTokens - last.totalTokens,
  inputTokens: total.inputTokens - last.inputTokens,
  cachedInputTokens: total.cachedInputTokens - last.cachedInputTokens,
  outputTokens: total.outputTokens - last.outputTokens,
  reasoningOutputTokens: total.reasoningOutputTokens - last.reasoningOutputTokens
})

const observationStatus = (status: string): ToolObservation["status"] =>
  status === "completed" ? "completed" : status === "failed" || status === "declined" ? "failed" : "in_progress"

/** The neutral tool call of a native tool item (`stage` before on start, after on completion). */
export const toolCall = (item: P.ToolItem, stage: "before" | "after", observe: boolean): ToolCallPayload => {
  const status = stage === "before" ? "in_progress" : observationStatus("status" in item ? item.status : "completed")
  const num = (n: number | null | undefined) => (typeof n === "number" && Number.isInteger(n) ? n : undefined)
  const opt = <K extends string, V>(k: K, v: V | undefined | null) => (v === undefined || v === null ? {} : { [k]: v })
  let name: string
  let observation: ToolObservation
  switch (item.type) {
    case "commandExecution":
      name = "command"
      observation = {
        kind: "command", status, command: item.command, ...opt("cwd", item.cwd),
        ...(stage === "after" ? { ...opt("exit_code", num(item.exitCode)), ...opt("duration_ms", num(item.durationMs)), ...opt("output", item.aggregatedOutput) } : {})
      }
      break
    case "fileChange":
      name = "file_change"
      observation = { kind: "command", status, name, arguments: { paths: item.changes.map((c) => c.path) } }
      break
    case "mcpToolCall":
      name = item.tool
      observation = { kind: "mcp", status, name, server: item.server, ...(stage === "after" ? { ...opt("duration_ms", num(item.durationMs)) } : {}) }
      break
    case "dynamicToolCall":
      name = item.tool
      observation = { kind: "function", status, name, ...(stage === "after" ? opt("duration_ms", num(item.durationMs)) : {}) }
      break
    case "webSearch":
      name = "web_search"
      observation = { kind: "web_search", status, ...(item.query === undefined ? {} : { action: { type: "search", query: item.query } }) }
      break
  }
  return { id: item.id, name, stage, ...(observe ? { observation } : {}) }
}

