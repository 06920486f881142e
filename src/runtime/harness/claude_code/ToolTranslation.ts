/**
 * Pure translations of Claude Code tool facts into engine-neutral wire shapes (reference harnesses.md §3.4,
 * §3.8): the tool observation of a `tool_use` / `tool_result` (`Bash` → `command`, `mcp__<server>__<tool>` →
 * `mcp`, any other tool → `function` with its arguments), and an `AskUserQuestion` input → the questions of
 * `prompt_for_user_choice`. Questions have no native id: they get stable ids `q0, q1, …` by position, and the
 * native question text is kept to build the native answer map; `is_other` is true because Claude always
 * accepts a free-text answer.
 */
import type { InteractionId } from "../../../proto/Ids.js"
import type { ToolObservation } from "../../../proto/RunEvents.js"
import type { Json } from "./StreamJson.js"

/** The observation of a tool call. */
export const observation = (name: string, input: Json | undefined, status: ToolObservation["status"]): ToolObservation => {
  if (name === "Bash") {
    const command = typeof input?.command === "string" ? input.command : undefined
    return { kind: "command", status, name, ...(command === undefined ? {} : { command }) }
  }
  // A Core function hosted by the daemon (FunctionServer.ts) is a function call, not an MCP tool.
  if (name.startsWith("mcp__functions__")) {
    return { kind: "function", status, name: name.slice("mcp__functions__".length), ...(input === undefined ? {} : { arguments: input }) }
  }
  const mcp = /^mcp__([^_]+(?:_[^_]+)*)__(.+)$/.exec(name)
  if (mcp !== null) return { kind: "mcp", status, server: mcp[1]!, name: mcp[2]!, ...(input === undefined ? {} : { arguments: input }) }
  return { kind: "function", status, name, ...(input === undefined ? {} : { arguments: input }) }
}


/** The wire payload of an AskUserQuestion request, and its questions (id → native text). */
export const askPayload = (id: InteractionId, input: Json, toolUseId: string | undefined) => {
  const raw = Array.isArray(input.questions) ? input.questions : []
  const questions = raw.flatMap((q: unknown, i) => {
    if (typeof q !== "object" || q === null) return []
    const o = q as { readonly [key: string]: unknown }
    if (typeof o.question !== "string") return []
    const options = (Array.isArray(o.options) ? o.options : []).flatMap((opt: unknown) => {
      const v = opt as { readonly label?: unknown; readonly description?: unknown } | null
      return v !== null && typeof v === "object" && typeof v.label === "string"
        ? [{ label: v.label, ...(typeof v.description === "string" ? { description: v.description } : {}) }]
        : []
    })
    return [{
      id: `q${i}`,
      question: o.question,
      ...(typeof o.header === "string" ? { header: o.header } : {}),
      multi_select: o.multiSelect === true,
      is_other: true, // Claude always accepts a free-text answer
      options
    }]
  })
  return { questions, payload: { ask_id: id, questions, ...(toolUseId === undefined ? {} : { tool_use_id: toolUseId }) } }
}

