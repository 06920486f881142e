/**
 * MCP connection authority on the Runtime (protocol "MCP connection authority"; reference §8.2). The request's
 * `connection_origin` was already validated with the common validator (`Execution.validateConfiguration`, which
 * also applies the HTTPS-with-host rule to bearer servers) before a factory was chosen; here the public servers
 * of the request and the servers installed by plugins are resolved into **transient effective bindings** that
 * the Harness receives in its `PrepareRequest`. They live only in memory for the Executor's lifetime: the bearer
 * token stays `Redacted`, is never persisted, logged or put in an error, and `describe` shows only its presence.
 *
 * A `required` server must initialize before the Executor exists: `initializeRequired` sends an MCP `initialize`
 * JSON-RPC request (Streamable HTTP: POST, `Accept: application/json, text/event-stream`) with the bearer as
 * an `Authorization` header and a 10 s bound; any failure fails the preparation before any input is submitted.
 * Decisions: docs/wire-decisions.md R18.
 */
import { Data, Duration, Effect, Option, Redacted } from "effect"
import type { ConnectionOrigin, PromptRequestPayload } from "../../proto/Execution.js"

/** One effective MCP server binding for one Executor. */
export interface McpBinding {
  readonly label: string
  readonly url: string
  readonly origin: ConnectionOrigin
  /** null: every tool; []: none. */
  readonly allowedTools: ReadonlyArray<string> | null
  readonly required: boolean
  readonly bearer: Option.Option<Redacted.Redacted<string>>
  /** `public`: from the request; `installed`: from a plugin installed on this daemon. */
  readonly source: "public" | "installed"
}

/** A server an installed plugin declares (its origin is always `environment`: the daemon connects). */
export interface InstalledMcpServer {
  readonly label: string
  readonly url: string
  readonly allowedTools: ReadonlyArray<string> | null
}

/**
 * The effective bindings: every public server of the request, then every installed server whose label no
 * public server uses (the request's server wins a label). An absent or null `mcp_http_servers` keeps the
 * installed servers only; `[]` explicitly declares no public servers.
 */
export const resolveMcpBindings = (
  configuration: PromptRequestPayload,
  installed: ReadonlyArray<InstalledMcpServer>
): ReadonlyArray<McpBinding> => {
  const bindings: Array<McpBinding> = (configuration.mcp_http_servers ?? []).map((s) => ({
    label: s.server_label,
    url: s.server_url,
    origin: s.connection_origin,
    allowedTools: s.allowed_tools,
    required: s.required === true,
    bearer: s.bearer_token === undefined || s.bearer_token === "" ? Option.none() : Option.some(Redacted.make(s.bearer_token)),
    source: "public"
  }))
  const labels = new Set(bindings.map((b) => b.label))
  for (const s of installed) {
    if (labels.has(s.label)) continue
    labels.add(s.label)
    bindings.push({ label: s.label, url: s.url, origin: "environment", allowedTools: s.allowedTools, required: false, bearer: Option.none(), source: "installed" })
  }
  return bindings
}

/** A JSON-safe description (the scripted harness shows it to a script): the bearer only as its presence. */
export const describe = (bindings: ReadonlyArray<McpBinding>) =>
  bindings.map((b) => ({
    label: b.label,
    url: b.url,
    origin: b.origin,
    allowed_tools: b.allowedTools,
    required: b.required,
    bearer: Option.isSome(b.bearer),
    source: b.source
  }))

/** A required server did not initialize. Carries no URL, label or token: only the server's position. */
export class McpInitializeFailed extends Data.TaggedError("McpInitializeFailed")<{
  readonly index: number
  readonly cause: "timeout" | "http_status" | "not_json_rpc" | "network"
}> {}

export const McpInitializeBudget: Duration.Duration = Duration.seconds(10)

const initializeBody = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "agentwire", version: "0" } }
})

/** Whether a response body is a JSON-RPC result for id 1 (plain JSON or one SSE `data:` line). */
const isInitializeResult = (contentType: string, text: string): boolean => {
  const candidates = contentType.includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim())
    : [text]
  return candidates.some((c) => {
    try {
      const v = JSON.parse(c) as { readonly id?: unknown; readonly result?: unknown }
      return v.id === 1 && typeof v.result === "object" && v.result !== null
    } catch {
      return false
    }
  })
}

/** Initializes every required binding, in order; the first failure stops (nothing else is contacted). */
export const initializeRequired = (
  bindings: ReadonlyArray<McpBinding>,
  budget: Duration.Duration = McpInitializeBudget
): Effect.Effect<void, McpInitializeFailed> =>
  Effect.forEach(bindings.map((b, index) => [b, index] as const).filter(([b]) => b.required), ([b, index]) =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(b.url, {
          method: "POST",
          signal,
          redirect: "error",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...(Option.isSome(b.bearer) ? { authorization: `Bearer ${Redacted.value(b.bearer.value)}` } : {})
          },
          body: initializeBody
        })
        if (!response.ok) {
          await response.body?.cancel()
          return "http_status" as const
        }
        const text = (await response.text()).slice(0, 65_536)
        return isInitializeResult(response.headers.get("content-type") ?? "", text) ? "ok" as const : "not_json_rpc" as const
      },
      catch: () => new McpInitializeFailed({ index, cause: "network" })
    }).pipe(
      Effect.timeoutOrElse({ duration: budget, orElse: () => Effect.fail(new McpInitializeFailed({ index, cause: "timeout" })) }),
      Effect.flatMap((r) => (r === "ok" ? Effect.void : Effect.fail(new McpInitializeFailed({ index, cause: r }))))
    ), { discard: true })
