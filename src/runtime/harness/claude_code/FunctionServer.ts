/**
 * Function tools for Claude Code without the Agent SDK: the daemon hosts an "SDK MCP server" named `functions`
 * on the CLI's control channel (the mechanism the Agent SDK's `createSdkMcpServer` uses, read from the 2.1.332
 * binary and proven against it). The server is announced in the `initialize` control request
 * (`sdkMcpServers: ["functions"]`); the CLI then sends each JSON-RPC message for it as a
 * `control_request {subtype: "mcp_message", server_name, message}` and takes the server's JSON-RPC reply from the
 * `control_response` (`{mcp_response}`). The model sees each Core function as `mcp__functions__<name>`, allowed
 * without a permission prompt (`--allowedTools`).
 *
 * `initialize` and `tools/list` are answered at once from the Session's `function_tools`; `tools/call` goes to
 * the current Turn, which emits `function_call` with the native `tool_use` id (`_meta["claudecode/toolUseId"]`)
 * as `call_id` and answers when Core's result arrives. Notifications get the empty reply the CLI expects.
 */
import { Effect } from "effect"
import type { FunctionTool } from "../../../proto/Execution.js"
import type { NativeUnknown } from "../Harness.js"
import { controlSuccess, type Json } from "./StreamJson.js"

export const FunctionsServer = "functions"

/** The model-visible name of a Core function. */
export const nativeToolName = (name: string) => `mcp__${FunctionsServer}__${name}`

/** One `tools/call` for the current Turn: `respond` writes the JSON-RPC result (a `CallToolResult`). */
export interface FunctionCall {
  readonly toolUseId: string
  readonly name: string
  readonly arguments: Json
  readonly respond: (result: Json) => Effect.Effect<void, NativeUnknown>
}

export interface FunctionServerHost {
  readonly tools: ReadonlyArray<FunctionTool>
  readonly write: (line: string) => Effect.Effect<void, NativeUnknown>
  /** Hands a call to the current Turn; false when there is none (the call is refused). */
  readonly call: (call: FunctionCall) => Effect.Effect<boolean>
}

const controlError = (requestId: string, error: string) =>
  JSON.stringify({ type: "control_response", response: { subtype: "error", request_id: requestId, error } })

/** Answers one `mcp_message` control request. */
export const onMcpMessage = (host: FunctionServerHost, requestId: string, serverName: string, message: Json) =>
  Effect.gen(function* () {
    if (serverName !== FunctionsServer) return yield* host.write(controlError(requestId, "unknown SDK MCP server"))
    const reply = (rpc: Json) => host.write(controlSuccess(requestId, { mcp_response: rpc }))
    const id = message.id
    if (typeof id !== "number" && typeof id !== "string") return yield* reply({ jsonrpc: "2.0", result: {}, id: 0 })
    const result = (r: Json) => reply({ jsonrpc: "2.0", id, result: r })
    const error = (code: number, text: string) => reply({ jsonrpc: "2.0", id, error: { code, message: text } })
    const params = typeof message.params === "object" && message.params !== null && !Array.isArray(message.params)
      ? message.params as Json
      : {}
    switch (message.method) {
      case "initialize":
        return yield* result({
          protocolVersion: typeof params.protocolVersion === "string" ? params.protocolVersion : "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: FunctionsServer, version: "1.0.0" }
        })
      case "tools/list":
        return yield* result({
          tools: host.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.parameters }) as Json)
        })
      case "tools/call": {
        const meta = typeof params._meta === "object" && params._meta !== null ? params._meta as Json : {}
        const toolUseId = meta["claudecode/toolUseId"]
        const name = params.name
        if (typeof toolUseId !== "string" || typeof name !== "string" || !host.tools.some((t) => t.name === name)) {
          return yield* error(-32602, "unknown function or call without a tool_use id")
        }
        const args = typeof params.arguments === "object" && params.arguments !== null && !Array.isArray(params.arguments)
          ? params.arguments as Json
          : {}
        const taken = yield* host.call({ toolUseId, name, arguments: args, respond: result })
        if (!taken) yield* error(-32603, "no active turn")
        return
      }
      default:
        return yield* error(-32601, "method not found")
    }
  })
