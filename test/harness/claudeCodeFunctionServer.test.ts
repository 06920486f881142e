/**
 * The `functions` SDK MCP server the claude_code adapter hosts on the CLI's control channel (FunctionServer.ts),
 * message by message: every `mcp_message` control request gets exactly one `control_response`, with the JSON-RPC
 * reply under `mcp_response`; calls go to the current Turn with the native tool_use id. The round trip against the
 * real binary is in claudeCode.capabilities.live.test.ts and the lifecycle suite.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type FunctionCall, onMcpMessage } from "../../src/runtime/harness/claude_code/FunctionServer.js"

const tools = [{ name: "lookup", description: "Looks a value up", parameters: { type: "object" } }]

const host = (active: boolean) => {
  const written: Array<unknown> = []
  const calls: Array<FunctionCall> = []
  return {
    written,
    calls,
    host: {
      tools,
      write: (line: string) => Effect.sync(() => void written.push(JSON.parse(line))),
      call: (call: FunctionCall) => Effect.sync(() => (active ? (calls.push(call), true) : false))
    }
  }
}
const response = (requestId: string, mcp: unknown) => ({
  type: "control_response",
  response: { subtype: "success", request_id: requestId, response: { mcp_response: mcp } }
})

describe("claude_code FunctionServer", () => {
  it.effect("answers initialize, tools/list and notifications at once", () =>
    Effect.gen(function* () {
      const h = host(true)
      yield* onMcpMessage(h.host, "r1", "functions", { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18" } })
      yield* onMcpMessage(h.host, "r2", "functions", { jsonrpc: "2.0", method: "notifications/initialized" })
      yield* onMcpMessage(h.host, "r3", "functions", { jsonrpc: "2.0", id: 1, method: "tools/list" })
      assert.deepStrictEqual(h.written, [
        response("r1", { jsonrpc: "2.0", id: 0, result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "functions", version: "1.0.0" } } }),
        response("r2", { jsonrpc: "2.0", result: {}, id: 0 }),
        response("r3", { jsonrpc: "2.0", id: 1, result: { tools: [{ name: "lookup", description: "Looks a value up", inputSchema: { type: "object" } }] } })
      ])
    }))

  it.effect("hands a call to the Turn with the native tool_use id and answers only when the Turn responds", () =>
    Effect.gen(function* () {
      const h = host(true)
      const call = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "lookup", arguments: { key: "k" }, _meta: { "claudecode/toolUseId": "toolu_1" } } }
      yield* onMcpMessage(h.host, "r4", "functions", call)
      assert.deepStrictEqual(h.written, [])
      assert.deepStrictEqual(h.calls.map((c) => [c.toolUseId, c.name, c.arguments]), [["toolu_1", "lookup", { key: "k" }]])
      yield* Effect.orDie(h.calls[0]!.respond({ content: [{ type: "text", text: "42" }], isError: false }))
      assert.deepStrictEqual(h.written, [response("r4", { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "42" }], isError: false } })])
    }))

  it.effect("refuses what it cannot serve, always with exactly one response", () =>
    Effect.gen(function* () {
      const h = host(false)
      yield* onMcpMessage(h.host, "r5", "other", { jsonrpc: "2.0", id: 1, method: "tools/list" })
      yield* onMcpMessage(h.host, "r6", "functions", { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "lookup", _meta: { "claudecode/toolUseId": "toolu_2" } } })
      yield* onMcpMessage(h.host, "r7", "functions", { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "lookup" } })
      yield* onMcpMessage(h.host, "r8", "functions", { jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "other", _meta: { "claudecode/toolUseId": "toolu_3" } } })
      yield* onMcpMessage(h.host, "r9", "functions", { jsonrpc: "2.0", id: 6, method: "resources/list" })
      assert.deepStrictEqual(h.written, [
        { type: "control_response", response: { subtype: "error", request_id: "r5", error: "unknown SDK MCP server" } },
        response("r6", { jsonrpc: "2.0", id: 3, error: { code: -32603, message: "no active turn" } }),
        response("r7", { jsonrpc: "2.0", id: 4, error: { code: -32602, message: "unknown function or call without a tool_use id" } }),
        response("r8", { jsonrpc: "2.0", id: 5, error: { code: -32602, message: "unknown function or call without a tool_use id" } }),
        response("r9", { jsonrpc: "2.0", id: 6, error: { code: -32601, message: "method not found" } })
      ])
    }))
})
