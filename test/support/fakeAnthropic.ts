/**
 * A fake Anthropic Messages server for real-binary tests (reference harnesses.md §3.12, §5): loopback only,
 * streaming SSE, `count_tokens`, non-streaming `/v1/messages`, any HEAD answered. Behaviour is scripted by a
 * keyword in the last user message (its text blocks searched from the end, `<system-reminder>` blocks skipped):
 *
 * | keyword | behaviour |
 * | --- | --- |
 * | none | echoes the text in two deltas; usage 50 in / 12 out |
 * | `THINK` | a thinking block, then the echo |
 * | `SLOW` | `slowDeltas` deltas `slowIntervalMs` apart; stops when the client disconnects |
 * | `TOOL` | a `Bash` tool_use (a command Claude asks permission for); after its tool_result: text |
 * | `ASK` | an `AskUserQuestion` tool_use with one question and two options; after its tool_result: text |
 * | `FUNC` | a `mcp__functions__lookup` tool_use; after its tool_result: text |
 * | `E401` `E429` `E500` `E529` `E400` `E404` | that HTTP status with the API's error JSON |
 *
 * Every error response carries `x-should-retry: false`, so the CLI sends one request. Requests are recorded
 * (path and body; headers without credential values) for history and resume assertions.
 */
import { Effect, type Scope } from "effect"
import type * as Http from "node:http"
import { jsonReply, loopbackServer, sse, sseHead } from "./fakeSse.js"

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  /** Header names only, plus which auth scheme was used (never the value). */
  readonly auth: "x-api-key" | "bearer" | "none"
  readonly body: unknown
}

export interface FakeAnthropic {
  /** `http://127.0.0.1:<port>` (no `/v1`; the CLI appends it). */
  readonly url: string
  readonly requests: ReadonlyArray<RecordedRequest>
  /** The user texts (keywords included) of every streamed Messages request, in order. */
  readonly prompts: () => ReadonlyArray<string>
}

export interface FakeAnthropicOptions {
  readonly slowDeltas?: number
  readonly slowIntervalMs?: number
}

const errorTypes: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  429: "rate_limit_error",
  500: "api_error",
  503: "api_error",
  529: "overloaded_error"
}

type Block = { readonly type: string; readonly text?: string; readonly content?: unknown }
interface Message {
  readonly role: string
  readonly content: string | ReadonlyArray<Block>
}

const blocksOf = (m: Message): ReadonlyArray<Block> =>
  typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content

/** The user texts of the last user message, `<system-reminder>` blocks skipped. */
const lastUserTexts = (messages: ReadonlyArray<Message>): { texts: ReadonlyArray<string>; toolResult: boolean } => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role !== "user") continue
    const blocks = blocksOf(m)
    const texts = blocks.flatMap((b) =>
      b.type === "text" && typeof b.text === "string" && !b.text.trimStart().startsWith("<system-reminder>") ? [b.text] : []
    )
    return { texts, toolResult: blocks.some((b) => b.type === "tool_result") }
  }
  return { texts: [], toolResult: false }
}

const keywords = ["E401", "E400", "E404", "E429", "E500", "E529", "SLOW", "THINK", "TOOL", "ASK", "FUNC"] as const
type Keyword = typeof keywords[number]

const keywordOf = (texts: ReadonlyArray<string>): Keyword | undefined => {
  for (let i = texts.length - 1; i >= 0; i--) {
    const found = keywords.find((k) => new RegExp(`\\b${k}\\b`).test(texts[i]!))
    if (found !== undefined) return found
  }
  return undefined
}

let messageCounter = 0

const usageStart = { input_tokens: 50, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

const streamMessage = async (
  res: Http.ServerResponse,
  model: string,
  blocks: ReadonlyArray<
    | { readonly type: "text"; readonly deltas: ReadonlyArray<string>; readonly intervalMs?: number }
    | { readonly type: "thinking"; readonly text: string }
    | { readonly type: "tool_use"; readonly name: string; readonly input: unknown }
  >,
  closed: () => boolean
) => {
  const id = `msg_fake_${++messageCounter}`
  sseHead(res)
  sse(res, "message_start", {
    type: "message_start",
    message: { id, type: "message", role: "assistant", model, content: [], stop_reason: null, usage: usageStart }
  })
  let stop = "end_turn"
  for (const [index, block] of blocks.entries()) {
    if (block.type === "text") {
      sse(res, "content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } })
      for (const delta of block.deltas) {
        if (closed()) return
        sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: delta } })
        if (block.intervalMs !== undefined) await new Promise((r) => setTimeout(r, block.intervalMs))
      }
    } else if (block.type === "thinking") {
      sse(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "thinking", thinking: "", signature: "" }
      })
      sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: block.text } })
      sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: "sig" } })
    } else {
      stop = "tool_use"
      sse(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: `toolu_fake_${messageCounter}_${index}`, name: block.name, input: {} }
      })
      sse(res, "content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) }
      })
    }
    sse(res, "content_block_stop", { type: "content_block_stop", index })
  }
  sse(res, "message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 12 } })
  sse(res, "message_stop", { type: "message_stop" })
  res.end()
}

const handleMessages = async (
  res: Http.ServerResponse,
  body: { readonly model?: string; readonly stream?: boolean; readonly messages?: ReadonlyArray<Message> },
  options: Required<FakeAnthropicOptions>,
  closed: () => boolean
) => {
  const model = body.model ?? "fake-model"
  const { texts, toolResult } = lastUserTexts(body.messages ?? [])
  const keyword = toolResult ? undefined : keywordOf(texts)
  const said = texts.join(" ").trim()
  if (keyword !== undefined && keyword.startsWith("E")) {
    const status = Number(keyword.slice(1))
    const type = errorTypes[status] ?? "api_error"
    return jsonReply(res, status, { type: "error", error: { type, message: `fake ${type}` } })
  }
  if (body.stream !== true) {
    return jsonReply(res, 200, {
      id: `msg_fake_${++messageCounter}`,
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text: "ok" }],
      stop_reason: "end_turn",
      usage: { input_tokens: 10, output_tokens: 1 }
    })
  }
  const echo = (prefix: string) => ({ type: "text" as const, deltas: [`${prefix} `, said.length > 0 ? said : "(empty)"] })
  switch (keyword) {
    case "THINK":
      return streamMessage(res, model, [{ type: "thinking", text: "pondering the question" }, echo("echo:")], closed)
    case "SLOW":
      return streamMessage(res, model, [{
        type: "text",
        deltas: Array.from({ length: options.slowDeltas }, (_, i) => `part${i} `),
        intervalMs: options.slowIntervalMs
      }], closed)
    case "TOOL":
      return streamMessage(res, model, [{
        type: "tool_use",
        name: "Bash",
        input: { command: "touch fake-tool-file && chmod 600 fake-tool-file && echo ok", description: "create a file" }
      }], closed)
    case "ASK":
      return streamMessage(res, model, [{
        type: "tool_use",
        name: "AskUserQuestion",
        input: {
          questions: [{
            question: "Which color?",
            header: "Color",
            multiSelect: false,
            options: [{ label: "Blue", description: "the sky" }, { label: "Red", description: "the fire" }]
          }]
        }
      }], closed)
    case "FUNC":
      return streamMessage(res, model, [{ type: "tool_use", name: "mcp__functions__lookup", input: { key: "k" } }], closed)
    default:
      return streamMessage(res, model, [echo(toolResult ? "after tool:" : "echo:")], closed)
  }
}

/** Starts the fake on 127.0.0.1 (an ephemeral port) for the enclosing Scope. */
export const makeFakeAnthropic = (options: FakeAnthropicOptions = {}): Effect.Effect<FakeAnthropic, never, Scope.Scope> =>
  Effect.gen(function* () {
    const resolved = { slowDeltas: options.slowDeltas ?? 20, slowIntervalMs: options.slowIntervalMs ?? 250 }
    const requests: Array<RecordedRequest> = []
    const port = yield* loopbackServer((req, res, raw) => {
      let closed = false
      res.on("close", () => {
        closed = true
      })
      let body: unknown = undefined
      try {
        body = raw.length > 0 ? JSON.parse(raw) : undefined
      } catch {
        body = undefined
      }
      const path = (req.url ?? "/").split("?")[0]!
      requests.push({
        method: req.method ?? "",
        path,
        auth: req.headers["x-api-key"] !== undefined ? "x-api-key" : req.headers.authorization !== undefined ? "bearer" : "none",
        body
      })
      if (req.method === "HEAD") return void res.writeHead(200).end()
      if (path === "/v1/messages/count_tokens") return jsonReply(res, 200, { input_tokens: 10 })
      if (path === "/v1/messages" && req.method === "POST") {
        void handleMessages(res, (body ?? {}) as never, resolved, () => closed || res.destroyed).catch(() => res.destroy())
        return
      }
      jsonReply(res, 404, { type: "error", error: { type: "not_found_error", message: "fake: unknown path" } })
    })
    return {
      url: `http://127.0.0.1:${port}`,
      requests,
      prompts: () =>
        requests.flatMap((r) => {
          const body = r.body as { stream?: boolean; messages?: ReadonlyArray<Message> } | undefined
          if (r.path !== "/v1/messages" || body?.stream !== true) return []
          return [lastUserTexts(body.messages ?? []).texts.join(" ")]
        })
    }
  })
