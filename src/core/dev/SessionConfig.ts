/**
 * The operator API's Session model and how it becomes the gateway's `ExecutionSpec`: an agent kind, the
 * Environment (type `none` for now) and the Agent configuration the admission table reads. `agent_options`
 * is secret-bearing (it may carry provider keys): it is stored, sent in the execution configuration, and
 * never returned by the API, logged or shown in the live view.
 *
 * Engine profiles are Core-side facts about a Harness engine (not wire facts). The dev Core knows two: the
 * `scripted` harness, which qualifies every public feature and declares both controls, `codex` (function
 * tools and multi-agent, no control) and `claude_code`, which qualifies exactly what its declaration supports (function tools
 * and images, no control: docs/harness-claude-code.md). Any other kind gets
 * a conservative profile (no controls, no qualified feature), so a feature it would need is refused with
 * `CapabilityUnsupported{source: "engine_profile"}` rather than guessed.
 */
import { Option, Redacted, Schema } from "effect"
import { Checks, Execution, Ids } from "../../proto/index.js"
import { type AgentConfiguration, type EngineProfile, publicFeatures } from "../CapabilityPolicy.js"
import type { ExecutionSpec } from "../ExecutionRequest.js"
import { InitializationRequest } from "./InitializationSpec.js"

export const MultiAgent = Schema.Struct({
  enabled: Schema.Boolean,
  max_concurrent_subagents: Schema.optionalKey(Checks.NonNegativeInt)
})

/**
 * A public MCP server of a Session. `bearer_token` is write-only: the operator API encrypts it at rest
 * (McpSecrets.ts) and keeps `bearer_set: true` in the stored configuration; it is never returned.
 */
export const SessionMcpServer = Schema.Struct({
  server_label: Schema.String.check(Checks.isNonBlank, Checks.isMaxBytes(256)),
  server_url: Schema.String.check(Checks.isNonBlank, Checks.isMaxBytes(4096)),
  /** null: every tool; []: none. */
  allowed_tools: Schema.NullOr(Schema.Array(Schema.String.check(Checks.isMaxBytes(512))).check(Schema.isMaxLength(256))),
  required: Schema.optionalKey(Schema.Boolean),
  /** Absent: service for an Environment of type none, environment otherwise. */
  connection_origin: Schema.optionalKey(Execution.ConnectionOrigin),
  bearer_token: Schema.optionalKey(Schema.String.check(Checks.isMaxBytes(8192))),
  /** Set by the store (never by a request): an encrypted bearer secret exists for this position. */
  bearer_set: Schema.optionalKey(Schema.Boolean)
})
export type SessionMcpServer = typeof SessionMcpServer.Type

/** The Agent configuration of a Session (every member optional; absent means the default). */
export const SessionConfiguration = Schema.Struct({
  /** Opaque engine options (model, system prompt, provider). Secret-bearing: stored, sent, never returned. */
  agent_options: Schema.optionalKey(Checks.JsonObject),
  text_verbosity: Schema.optionalKey(Execution.TextVerbosity),
  output_format: Schema.optionalKey(Execution.OutputFormat),
  multi_agent: Schema.optionalKey(MultiAgent),
  tool_search: Schema.optionalKey(Schema.Boolean),
  function_tools: Schema.optionalKey(Schema.Array(Execution.FunctionTool)),
  disable_programmatic_tool_calling: Schema.optionalKey(Schema.Boolean),
  mcp_http_servers: Schema.optionalKey(Schema.Array(SessionMcpServer).check(Schema.isMaxLength(32)))
})
export type SessionConfiguration = typeof SessionConfiguration.Type

const CanonicalUuid = Schema.String.check(
  Schema.isPattern(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  Schema.makeFilter((s: string) => s !== "00000000-0000-0000-0000-000000000000" || "the nil UUID is not an Environment id")
)

/**
 * A `self_hosted` Environment: the Environment a device's daemon is bound to (`--environment-id`,
 * `--workspace`, `--network-access`). Core sends exactly this binding as `local_environment`; the daemon
 * admits it only when `id`, `workspace_directory` (the real path of its `--workspace`) and `network_access`
 * match its own binding. The id is a canonical UUID (the workspace write validator requires one).
 */
export const SelfHostedEnvironment = Schema.Struct({
  type: Schema.Literal("self_hosted"),
  id: CanonicalUuid,
  workspace_directory: Schema.String.check(Checks.isNonBlank, Checks.isMaxBytes(4096)),
  network_access: Schema.optionalKey(Execution.NetworkAccess)
})
export type SelfHostedEnvironment = typeof SelfHostedEnvironment.Type

export const EnvironmentSpec = Schema.Union([Schema.Struct({ type: Schema.Literal("none") }), SelfHostedEnvironment])
export type EnvironmentSpec = typeof EnvironmentSpec.Type

/** The exact `local_environment` binding of a hosted Environment (network access defaults to the daemon's `disabled`). */
export const localEnvironment = (env: SelfHostedEnvironment): Execution.LocalEnvironment => ({
  id: env.id,
  workspace_directory: env.workspace_directory,
  capability_sources: null,
  network_access: env.network_access ?? "disabled"
})

/** `POST /api/v1/operator/sessions`. */
export const CreateSessionRequest = Schema.Struct({
  agent_kind: Schema.String.check(Checks.isNonBlank, Checks.isMaxBytes(128)),
  environment: Schema.optionalKey(EnvironmentSpec),
  configuration: Schema.optionalKey(SessionConfiguration),
  /**
   * Pin the Session to one device (otherwise the first admitting online device is chosen at its first Turn).
   * Required for a `self_hosted` Environment: the Environment lives on that device.
   */
  device_id: Schema.optionalKey(Ids.DeviceId),
  /**
   * Files, skills, env and a setup command installed on the device before the Session's first Turn is
   * dispatched (InitializationSpec.ts; needs a `self_hosted` Environment).
   */
  initialization: Schema.optionalKey(InitializationRequest)
})
export type CreateSessionRequest = typeof CreateSessionRequest.Type

/**
 * `claude_code` declares two public features, `function_tools` and `message_images`, and none of the others
 * (`structured_output`, `multi_agent`'s sub-agent observations, `tool_search`, function-result images, HTTP MCP)
 * and neither control (`web_search_control`, `text_verbosity`), so its profile qualifies exactly those two.
 */
const claudeCodeProfile: EngineProfile = {
  controls: { web_search: false, text_verbosity: false },
  qualifies: new Set(["function_tools", "message_images"])
}

/**
 * The engine profiles the dev Core knows. `codex` qualifies exactly what the Codex adapter's declaration
 * supports among the public features (function tools, multi-agent with sub-agent observations); it has neither
 * engine control.
 */
export const engineProfileFor = (agentKind: string): EngineProfile =>
  agentKind === "scripted"
    ? { controls: { web_search: true, text_verbosity: true }, qualifies: new Set(publicFeatures) }
    : agentKind === "codex"
    ? { controls: { web_search: false, text_verbosity: false }, qualifies: new Set(["function_tools", "multi_agent"]) }
    : agentKind === "claude_code"
    ? claudeCodeProfile
    : { controls: { web_search: false, text_verbosity: false }, qualifies: new Set() }

/** The positions of the stored servers whose bearer secret is kept encrypted (McpSecrets.ts). */
export const sealedBearerIndexes = (config: SessionConfiguration): ReadonlyArray<number> =>
  (config.mcp_http_servers ?? []).flatMap((s, i) => (s.bearer_set === true ? [i] : []))

/**
 * The admission table's view of a stored configuration; `bearers` holds the decrypted secrets by server
 * position (only where a Turn's request is built).
 */
export const agentConfiguration = (
  config: SessionConfiguration,
  bearers: ReadonlyMap<number, Redacted.Redacted<string>> = new Map()
): AgentConfiguration => ({
  multi_agent: config.multi_agent ?? { enabled: false },
  ...(config.output_format === undefined ? {} : { output_format: config.output_format }),
  tool_search: config.tool_search ?? false,
  function_tools: config.function_tools ?? [],
  disable_programmatic_tool_calling: config.disable_programmatic_tool_calling ?? false,
  mcp_http_servers: (config.mcp_http_servers ?? []).map((s, i) => {
    const bearer = bearers.get(i)
    return {
      server_label: s.server_label,
      server_url: s.server_url,
      allowed_tools: s.allowed_tools,
      required: s.required === true,
      ...(s.connection_origin === undefined ? {} : { connection_origin: s.connection_origin }),
      ...(bearer === undefined ? {} : { vault_credential: bearer })
    }
  }),
  ...(config.text_verbosity === undefined ? {} : { text_verbosity: config.text_verbosity })
})

/**
 * The shared configuration rules checked at creation, so a Session that can never run is refused at once: the
 * function-tool and tool-search rules, and for MCP servers the common validator's origin, URL and
 * HTTPS-with-host rules against the Session's Environment (a bearer over plain http is refused here).
 */
export const configurationIssue = (config: SessionConfiguration, environment: EnvironmentSpec = { type: "none" }): Option.Option<string> =>
  Execution.validateConfiguration({
    agent_kind: "check",
    conversation_id: "",
    run_id: "",
    ...(environment.type === "none" ? { disable_execution_environment: true } : { local_environment: localEnvironment(environment) }),
    ...(config.function_tools === undefined ? {} : { function_tools: config.function_tools }),
    ...(config.tool_search === undefined ? {} : { tool_search: config.tool_search }),
    ...(config.mcp_http_servers === undefined ? {} : {
      mcp_http_servers: config.mcp_http_servers.map((s) => ({
        connection_origin: s.connection_origin ?? (environment.type === "none" ? "service" : "environment"),
        server_label: s.server_label,
        server_url: s.server_url,
        allowed_tools: s.allowed_tools,
        ...(s.bearer_token === undefined ? {} : { bearer_token: s.bearer_token })
      }))
    })
  })

/**
 * What the store keeps of a requested configuration: every server's `bearer_token` replaced by `bearer_set`
 * (true when a non-empty secret was given), and the secrets to encrypt by position.
 */
export const withoutSecrets = (config: SessionConfiguration): {
  readonly stored: SessionConfiguration
  readonly secrets: ReadonlyArray<{ readonly index: number; readonly secret: Redacted.Redacted<string> }>
} => {
  if (config.mcp_http_servers === undefined) return { stored: config, secrets: [] }
  const secrets: Array<{ index: number; secret: Redacted.Redacted<string> }> = []
  const servers = config.mcp_http_servers.map((s, index) => {
    const { bearer_set: _ignored, bearer_token, ...rest } = s
    if (bearer_token === undefined || bearer_token === "") return rest
    secrets.push({ index, secret: Redacted.make(bearer_token) })
    return { ...rest, bearer_set: true }
  })
  return { stored: { ...config, mcp_http_servers: servers }, secrets }
}

/** The frozen execution spec of one Turn of a Session. */
export const executionSpec = (session: {
  readonly sessionId: string
  readonly agentKind: string
  readonly configuration: SessionConfiguration
  readonly hasStartedTurn: boolean
  readonly nativeSessionId: string | undefined
  readonly environment?: EnvironmentSpec
  /** The decrypted bearer secrets by server position (McpSecrets.open); absent: none. */
  readonly mcpBearers?: ReadonlyMap<number, Redacted.Redacted<string>>
}): ExecutionSpec => ({
  session_id: Ids.unsafeMake.sessionId(session.sessionId),
  agent_kind: session.agentKind,
  ...(session.configuration.agent_options === undefined ? {} : { agent_options: session.configuration.agent_options }),
  engine: engineProfileFor(session.agentKind),
  agent: agentConfiguration(session.configuration, session.mcpBearers),
  environment: session.environment === undefined || session.environment.type === "none"
    ? { type: "none" }
    : { type: "self_hosted", binding: localEnvironment(session.environment) },
  session: { has_started_turn: session.hasStartedTurn, native_session_id: session.nativeSessionId }
})

/**
 * The configuration as the API returns it: `agent_options` is replaced by whether it is set, and each MCP
 * server's bearer secret by `bearer: {"set": true|false}` (never the secret, never its ciphertext).
 */
export const publicConfiguration = (config: SessionConfiguration): Record<string, unknown> => {
  const { agent_options, mcp_http_servers, ...rest } = config
  return {
    ...rest,
    ...(mcp_http_servers === undefined ? {} : {
      mcp_http_servers: mcp_http_servers.map(({ bearer_set, bearer_token, ...s }) => ({
        ...s,
        bearer: { set: bearer_set === true || (bearer_token !== undefined && bearer_token !== "") }
      }))
    }),
    agent_options_set: agent_options !== undefined
  }
}
