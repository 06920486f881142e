/**
 * Per-Run usage for Claude Code (reference harnesses.md §3.10): the sum, over the Run's native results, of
 * `model_usage_since_last_result` (per model, since the previous result: every call, sub-agents included).
 * Each result is counted once, so the snapshot is this Run's measurement, never the process total that
 * `modelUsage` and `total_cost_usd` carry (which after `--resume` also include the stored transcript).
 */
import type { Usage } from "../../../proto/RunEvents.js"

export interface RunUsage {
  readonly input: number
  readonly cacheRead: number
  readonly cacheCreation: number
  readonly output: number
  readonly thinking: number
  readonly cost: number
  readonly models: ReadonlyArray<string>
}

export const emptyUsage: RunUsage = { input: 0, cacheRead: 0, cacheCreation: 0, output: 0, thinking: 0, cost: 0, models: [] }

const count = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) && u >= 0 ? Math.floor(u) : 0)
const amount = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) && u >= 0 ? u : 0)

/** Adds one result's `model_usage_since_last_result`. */
export const addUsage = (usage: RunUsage, sinceLast: { readonly [model: string]: unknown }): RunUsage =>
  Object.entries(sinceLast).reduce((acc, [model, raw]) => {
    if (typeof raw !== "object" || raw === null) return acc
    const m = raw as { readonly [key: string]: unknown }
    return {
      input: acc.input + count(m.inputTokens),
      cacheRead: acc.cacheRead + count(m.cacheReadInputTokens),
      cacheCreation: acc.cacheCreation + count(m.cacheCreationInputTokens),
      output: acc.output + count(m.outputTokens),
      thinking: acc.thinking + count(m.thinkingTokens),
      cost: acc.cost + amount(m.costUSD),
      models: acc.models.includes(model) ? acc.models : [...acc.models, model]
    }
  }, usage)

/** The wire snapshot: total input counts cached reads and cache writes; reasoning is part of output. */
export const toUsage = (u: RunUsage): Usage => {
  const input = u.input + u.cacheRead + u.cacheCreation
  return {
    tokens: {
      input_tokens: input,
      cached_input_tokens: u.cacheRead,
      output_tokens: u.output,
      reasoning_output_tokens: u.thinking,
      total_tokens: input + u.output
    },
    input_tokens: input,
    output_tokens: u.output,
    provider: "anthropic",
    ...(u.models.length === 1 ? { model: u.models[0]! } : {}),
    cost_usd: u.cost
  }
}
