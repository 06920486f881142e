/**
 * A fake OpenAI Responses server for the Codex adapter tests (reference harnesses.md §2.11, §5): loopback
 * HTTP, `POST /v1/responses` answered with an SSE stream chosen by a keyword in the last user message.
 *
 * Keywords (first match wins, searched in the text of the last `user` message):
 * - `SLOW`: 40 text deltas 250 ms apart; stops writing when the client disconnects (steer / interrupt).
 * - `REASON`: a reasoning summary, then the echoed text.
 * - `SHELL:<command>`: an `exec_command` call for `<command>` (escalated, so it asks for approval under
 *   `untrusted`/`on-request`); the follow-up request (tool output after the last user message) gets text.
 * - `DYN:<name>`: a call of the dynamic (function) tool `<name>` with `{"q":"x"}`; follow-up: text.
 * - `RUI`: a `request_user_input` call with one question and two options; follow-up: text.
 * - `SPAWN:<task>`: a `multi_agent_v1` `spawn_agent` call with `<task>` as the child's message, then (after its
 *   output) a `wait_agent` call on the spawned agent, then text. The child's own request (its user message is
 *   `<task>`) is answered like any other, so a `<task>` without keywords is echoed.
 * - `E429`, `E500`, `ECTX`: HTTP 429 rate limit, HTTP 500, HTTP 400 `context_length_exceeded`.
 * - otherwise: the user text echoed in two deltas, usage 100 in / 10 cached / 20 out / 5 reasoning.
 *
 * Every request is recorded (body and the authorization header) so tests can check history, tools and that
 * the key reached the server only in its header.
 */
import { Effect, type Scope } from "effect"
import type * as Http from "node:http"
import { jsonReply, loopbackServer, sse as event, sseHead } from "./fakeSse.js"

export interface SeenResponsesRequest {
  readonly body: {
    readonly input: ReadonlyArray<Record<string, unknown>>
    readonly tools?: ReadonlyArray<Record<string, unknown>>
    readonly [key: string]: unknown
  }
  readonly authorization: string | undefined
}

export interface FakeResponses {
  /** `http://127.0.0.1:PORT/v1` (Codex appends `/responses`). */
  readonly baseUrl: string
  readonly requests: () => ReadonlyArray<SeenResponsesRequest>
}

export const fakeUsage = { input: 100, cached: 10, output: 20, reasoning: 5, total: 120 } as const

type Item = Record<string, unknown>

const textOf = (item: Item): string => {
  const content = item["content"]
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content
    .map((part: unknown) =>
      typeof part === "object" && part !== null && typeof (part as Item)["text"] === "string" ? (part as Item)["text"] as string : ""
    )
    .join("")
}

/**
 * The index of the last real user message (skipping Codex's `<environment_context>`, `<turn_aborted>` and the
 * `<subagent_notification>` it injects when a sub-agent finishes).
 */
const lastUserIndex = (input: ReadonlyArray<Item>): number => {
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i]!
    if (item["role"] !== "user") continue
    const text = textOf(item)
    if (text.startsWith("<environment_context>") || text.startsWith("<turn_aborted>") || text.startsWith("<subagent_notification>")) continue
    return i
  }
  return -1
}

/** Responses events repeat their type inside the data. */
const sse = (res: Http.ServerResponse, type: string, data: Record<string, unknown>) => event(res, type, { type, ...data })

const completed = (res: Http.ServerResponse, id: string) =>
  sse(res, "response.completed", {
    response: {
      id,
      usage: {
        input_tokens: fakeUsage.input,
        input_tokens_details: { cached_tokens: fakeUsage.cached },
        output_tokens: fakeUsage.output,
        output_tokens_details: { reasoning_tokens: fakeUsage.reasoning },
        total_tokens: fakeUsage.total
      }
    }
  })

const writeText = (res: Http.ServerResponse, n: number, fragments: ReadonlyArray<string>) => {
  const id = `msg_${n}`
  sse(res, "response.output_item.added", { output_index: 0, item: { type: "message", role: "assistant", id, content: [] } })
  for (const delta of fragments) {
    sse(res, "response.output_text.delta", { item_id: id, output_index: 0, content_index: 0, delta })
  }
  sse(res, "response.output_item.done", {
    output_index: 0,
    item: { type: "message", role: "assistant", id, content: [{ type: "output_text", text: fragments.join("") }] }
  })
}

const writeCall = (res: Http.ServerResponse, n: number, name: string, args: Record<string, unknown>, namespace?: string) => {
  const item = {
    type: "function_call",
    id: `fc_${n}`,
    call_id: `call_${n}`,
    name,
    ...(namespace === undefined ? {} : { namespace }),
    arguments: JSON.stringify(args)
  }
  sse(res, "response.output_item.added", { output_index: 0, item: { ...item, arguments: "" } })
  sse(res, "response.output_item.done", { output_index: 0, item })
}

const httpError = (res: Http.ServerResponse, status: number, type: string, code: string) =>
  jsonReply(res, status, { error: { type, code, message: `fake ${code}` } })

/** Starts the fake on 127.0.0.1 (a random port); it stops when the scope closes. */
export const makeFakeResponses: Effect.Effect<FakeResponses, never, Scope.Scope> = Effect.gen(function* () {
  const requests: Array<SeenResponsesRequest> = []
  let counter = 0
  const handle = (req: Http.IncomingMessage, res: Http.ServerResponse, raw: string) => {
    if (req.method !== "POST" || !(req.url ?? "").endsWith("/responses")) {
      res.writeHead(404).end()
      return
    }
    const body = JSON.parse(raw) as SeenResponsesRequest["body"]
    requests.push({ body, authorization: req.headers["authorization"] })
    const n = ++counter
    const input = body.input
    const last = lastUserIndex(input)
    const text = last < 0 ? "" : textOf(input[last]!)
    const followUp = input.slice(last + 1).some((item) => item["type"] === "function_call_output")
    /** The last tool call of this turn and its output (the sub-agent script reads them). */
    const lastCall = input.slice(last + 1).filter((item) => item["type"] === "function_call").at(-1)
    const lastOutput = input.slice(last + 1).filter((item) => item["type"] === "function_call_output").at(-1)
    if (text.includes("E429")) return httpError(res, 429, "rate_limit_exceeded", "rate_limit_exceeded")
    if (text.includes("E500")) return httpError(res, 500, "server_error", "server_error")
    if (text.includes("ECTX")) return httpError(res, 400, "invalid_request_error", "context_length_exceeded")
    sseHead(res)
    const id = `resp_${n}`
    sse(res, "response.created", { response: { id } })
    const shell = /SHELL:(.+)$/m.exec(text)
    const dyn = /DYN:(\w+)/.exec(text)
    const spawn = /SPAWN:(.+)$/m.exec(text)
    if (spawn !== null && !followUp) {
      writeCall(res, n, "spawn_agent", { message: spawn[1]!.trim() }, "multi_agent_v1")
    } else if (spawn !== null && lastCall?.["name"] === "spawn_agent") {
      // Wait for the spawned agent (its id is in the spawn output) so the child's turn ends inside this one.
      const output = String(lastOutput?.["output"] ?? "")
      const agent = /"(?:agent_id|id)"\s*:\s*"([^"]+)"/.exec(output)?.[1] ?? output
      writeCall(res, n, "wait_agent", { targets: [agent], timeout_ms: 30000 }, "multi_agent_v1")
    } else if (!followUp && shell !== null) {
      writeCall(res, n, "exec_command", { cmd: shell[1]!.trim(), sandbox_permissions: "require_escalated", justification: "test" })
    } else if (!followUp && dyn !== null) {
      writeCall(res, n, dyn[1]!, { q: "x" })
    } else if (!followUp && text.includes("RUI")) {
      writeCall(res, n, "request_user_input", {
        questions: [{
          id: "color",
          header: "Color",
          question: "Which color?",
          options: [{ label: "Blue", description: "cool" }, { label: "Red", description: "warm" }]
        }]
      })
    } else if (text.includes("SLOW") && !followUp) {
      const msg = `msg_${n}`
      sse(res, "response.output_item.added", { output_index: 0, item: { type: "message", role: "assistant", id: msg, content: [] } })
      let i = 0
      const timer = setInterval(() => {
        if (res.destroyed || res.writableEnded) return clearInterval(timer)
        if (i < 40) {
          sse(res, "response.output_text.delta", { item_id: msg, output_index: 0, content_index: 0, delta: `s${i++} ` })
          return
        }
        clearInterval(timer)
        sse(res, "response.output_item.done", {
          output_index: 0,
          item: { type: "message", role: "assistant", id: msg, content: [{ type: "output_text", text: "slow done" }] }
        })
        completed(res, id)
        res.end()
      }, 250)
      res.on("close", () => clearInterval(timer))
      return
    } else {
      if (text.includes("REASON") && !followUp) {
        const rid = `rs_${n}`
        sse(res, "response.output_item.added", { output_index: 0, item: { type: "reasoning", id: rid, summary: [] } })
        sse(res, "response.reasoning_summary_part.added", { item_id: rid, output_index: 0, summary_index: 0, part: { type: "summary_text", text: "" } })
        sse(res, "response.reasoning_summary_text.delta", { item_id: rid, output_index: 0, summary_index: 0, delta: "thinking hard" })
        sse(res, "response.reasoning_summary_text.done", { item_id: rid, output_index: 0, summary_index: 0, text: "thinking hard" })
        sse(res, "response.output_item.done", {
          output_index: 0,
          item: { type: "reasoning", id: rid, summary: [{ type: "summary_text", text: "thinking hard" }] }
        })
      }
      const reply = followUp ? "tool done" : `echo: ${text}`
      const half = Math.ceil(reply.length / 2)
      writeText(res, n, [reply.slice(0, half), reply.slice(half)])
    }
    completed(res, id)
    res.end()
  }
  const port = yield* loopbackServer(handle)
  return { baseUrl: `http://127.0.0.1:${port}/v1`, requests: () => requests }
})
