/**
 * The execution configuration (`PromptRequestPayload`): the payload of `prompt_request` and the
 * `configuration` of `execution_prepare`, with its parts (execution controls, output format, local
 * Environment, HTTP MCP servers, function tools), plus `prompt_cancel` and `device_shutdown`.
 * The validators here are the shared configuration rules both sides call before any native work.
 * `agent_options`, `mcp_http_servers[].bearer_token` and the whole request are secret-bearing: never log them.
 */
import { Option, Schema } from "effect"
import { fitsUtf8Bytes, isCanonicalUuidString, isMaxBytes, isNonBlank, JsonObject, NonNegativeInt } from "./Checks.js"
import type { CapabilityName } from "./Capabilities.js"
import { DeliveryId } from "./Ids.js"
import {
  MaxCapabilitySources,
  MaxCorrelationIdBytes,
  MaxFunctionNameBytes,
  MaxFunctionTools,
  MaxPathBytes
} from "./Limits.js"
import { hasImages, MessageInput } from "./MessageInput.js"

// ---------------------------------------------------------------------------------------------- controls

/** Structured output: a json_schema passed through unchanged. Requires `structured_output` (Core also wants `message_items`). */
export const OutputFormat = Schema.Struct({ type: Schema.Literal("json_schema"), schema: Schema.Json })
export type OutputFormat = typeof OutputFormat.Type

export const WebSearchMode = Schema.Literals(["disabled", "enabled"])
export type WebSearchMode = typeof WebSearchMode.Type
export const TextVerbosity = Schema.Literals(["low", "medium", "high"])
export type TextVerbosity = typeof TextVerbosity.Type

/** Engine-neutral controls; Core always sends them. Native option names belong to the adapter. */
export const ExecutionControls = Schema.Struct({
  web_search: WebSearchMode,
  text_verbosity: TextVerbosity,
  disable_programmatic_tool_calling: Schema.optionalKey(Schema.Boolean),
  output_format: Schema.optionalKey(OutputFormat)
})
export type ExecutionControls = typeof ExecutionControls.Type

// ---------------------------------------------------------------------------------------------- environment

/** Skill or plugin identity of a capability source. */
export const SourceMetadata = Schema.Struct({
  type: Schema.Literal("inline"),
  name: Schema.String.check(isNonBlank),
  description: Schema.String.check(isNonBlank)
})
export type SourceMetadata = typeof SourceMetadata.Type

/** The frozen capability selection of an Environment. */
export const CapabilitySources = Schema.Struct({
  skills: Schema.optionalKey(Schema.Array(SourceMetadata).check(Schema.isMaxLength(MaxCapabilitySources))),
  plugins: Schema.optionalKey(Schema.Array(SourceMetadata).check(Schema.isMaxLength(MaxCapabilitySources))),
  directories: Schema.optionalKey(
    Schema.Array(Schema.String.check(isNonBlank, isMaxBytes(MaxPathBytes))).check(
      Schema.isMaxLength(MaxCapabilitySources),
      Schema.makeFilter((dirs) => new Set(dirs).size === dirs.length, { expected: "unique directories" })
    )
  )
})
export type CapabilitySources = typeof CapabilitySources.Type

export const NetworkAccess = Schema.Literals(["enabled", "disabled", "restricted"])
export type NetworkAccess = typeof NetworkAccess.Type

/**
 * The bound Environment for `openai_hosted` / `self_hosted`. It carries no working directory: the Runtime
 * compares `workspace_directory` with its own binding.
 */
export const LocalEnvironment = Schema.Struct({
  id: Schema.String.check(isNonBlank, isMaxBytes(128)),
  workspace_directory: Schema.String.check(isMaxBytes(MaxPathBytes)),
  capability_sources: Schema.NullOr(CapabilitySources),
  capabilities: Schema.optionalKey(Schema.Boolean),
  tool_environment: Schema.optionalKey(Schema.Boolean),
  network_access: Schema.optionalKey(NetworkAccess),
  allowed_domains: Schema.optionalKey(Schema.Array(Schema.String))
})
export type LocalEnvironment = typeof LocalEnvironment.Type

// ---------------------------------------------------------------------------------------------- tools

export const ConnectionOrigin = Schema.Literals(["service", "environment"])
export type ConnectionOrigin = typeof ConnectionOrigin.Type

/** A public HTTP MCP server. `connection_origin` is required: there is no default on the wire. */
export const McpHttpServer = Schema.Struct({
  connection_origin: ConnectionOrigin,
  server_label: Schema.String,
  server_url: Schema.String,
  /** null allows every tool; [] allows none. The key is always present. */
  allowed_tools: Schema.NullOr(Schema.Array(Schema.String)),
  required: Schema.optionalKey(Schema.Boolean),
  /** Transient secret resolved by Core from a Vault credential: never persisted or logged. */
  bearer_token: Schema.optionalKey(Schema.String)
})
export type McpHttpServer = typeof McpHttpServer.Type

/** A client-executed function the model may call. */
export const FunctionTool = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: Schema.Json,
  defer_loading: Schema.optionalKey(Schema.Boolean)
})
export type FunctionTool = typeof FunctionTool.Type

// ---------------------------------------------------------------------------------------------- configuration

/**
 * The prompt request / execution configuration. Keys Go always writes are required; `omitempty` keys are
 * optional. Requests without an opt-in keep the frames and fields they had without it.
 */
export const PromptRequestPayload = Schema.Struct({
  max_concurrent_subagents: Schema.optionalKey(NonNegativeInt),
  agent_kind: Schema.NonEmptyString,
  /** Legacy per-conversation scope; Core leaves it empty. */
  conversation_id: Schema.String,
  /** Mirrors Envelope.id in prompt_request; empty in execution_prepare. */
  run_id: Schema.String,
  input: Schema.optionalKey(MessageInput),
  /** Opaque engine options (model, system prompt, provider): secret-bearing. */
  agent_options: Schema.optionalKey(JsonObject),
  execution_controls: Schema.optionalKey(ExecutionControls),
  /** Absent or null: no HTTP MCP override; []: explicitly no servers. */
  mcp_http_servers: Schema.optionalKey(Schema.NullOr(Schema.Array(McpHttpServer))),
  local_environment: Schema.optionalKey(LocalEnvironment),
  agent_session_id: Schema.optionalKey(Schema.String),
  workspace_read_only: Schema.optionalKey(Schema.Boolean),
  agent_state_key: Schema.optionalKey(Schema.String),
  workspace_authoring: Schema.optionalKey(Schema.Boolean),
  release_on_completion: Schema.optionalKey(Schema.Boolean),
  strict_resume: Schema.optionalKey(Schema.Boolean),
  require_existing_native_session: Schema.optionalKey(Schema.Boolean),
  observe_messages: Schema.optionalKey(Schema.Boolean),
  observe_tool_observations: Schema.optionalKey(Schema.Boolean),
  observe_subagent_identities: Schema.optionalKey(Schema.Boolean),
  function_tools: Schema.optionalKey(Schema.Array(FunctionTool)),
  tool_search: Schema.optionalKey(Schema.Boolean),
  disable_execution_environment: Schema.optionalKey(Schema.Boolean),
  disable_subagents: Schema.optionalKey(Schema.Boolean)
})
export type PromptRequestPayload = typeof PromptRequestPayload.Type
/** The same object, named for its role inside execution_prepare. */
export type ExecutionConfiguration = PromptRequestPayload

/** `prompt_cancel`: with a `delivery_id` the Runtime answers with a cancellation receipt; without it, no receipt. */
export const PromptCancelPayload = Schema.Struct({ delivery_id: Schema.optionalKey(DeliveryId) })
export type PromptCancelPayload = typeof PromptCancelPayload.Type

/** `device_shutdown`: close active and idle Executors and keep waiting for confirmed cleanup; no reply. */
export const DeviceShutdownPayload = Schema.Struct({ reason: Schema.optionalKey(Schema.String) })
export type DeviceShutdownPayload = typeof DeviceShutdownPayload.Type

// ---------------------------------------------------------------------------------------------- validators

/** Why a configuration violates the shared rules. */
export type ConfigurationIssue =
  | "environment_conflict" // local_environment together with disable_execution_environment
  | "mcp_origin_service" // a service-origin server without Environment type none
  | "mcp_origin_environment" // an environment-origin server without a networked local Environment
  | "mcp_server_url" // not an absolute http(s) URL with a host, or it carries credentials, a query or a fragment
  | "mcp_bearer_insecure" // a bearer token for a server whose URL is not https with a host
  | "tool_search_pairing" // tool_search and deferred functions must appear together
  | "too_many_functions" // more than MaxFunctionTools (64) function tools
  | "duplicate_function" // two function tools with one name
  | "blank_function_name"
  | "function_name_too_long" // a function name over MaxFunctionNameBytes (512) UTF-8 bytes

/** An MCP server URL by the public rule (absolute http(s) with a host; no credentials, query or fragment). */
const mcpUrl = (text: string): URL | undefined => {
  if (!URL.canParse(text)) return undefined
  const url = new URL(text)
  if (url.protocol !== "https:" && url.protocol !== "http:") return undefined
  if (url.hostname === "" || url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") return undefined
  if (text.includes("?") || text.includes("#")) return undefined
  return url
}

/**
 * The Environment, MCP-origin, function-tool and tool-search rules (`ValidateConnectionOrigin`,
 * the MCP server URL rule and the HTTPS-with-host rule for bearer servers, `ValidateToolSearch`, at most 64 function tools with unique, non-blank names of at most 512 UTF-8 bytes),
 * checked before a factory is selected. Returns the first issue found; pure, never throws.
 */
export const validateConfiguration = (config: PromptRequestPayload): Option.Option<ConfigurationIssue> => {
  const local = config.local_environment !== undefined
  const none = config.disable_execution_environment === true
  if (local && none) return Option.some("environment_conflict")
  for (const server of config.mcp_http_servers ?? []) {
    if (server.connection_origin === "service" && (!none || local)) return Option.some("mcp_origin_service")
    if (
      server.connection_origin === "environment" &&
      (!local || none || config.local_environment?.network_access !== "enabled")
    ) return Option.some("mcp_origin_environment")
    const url = mcpUrl(server.server_url)
    if (url === undefined) return Option.some("mcp_server_url")
    if (server.bearer_token !== undefined && server.bearer_token !== "" && url.protocol !== "https:") {
      return Option.some("mcp_bearer_insecure")
    }
  }
  const tools = config.function_tools ?? []
  if (tools.length > MaxFunctionTools) return Option.some("too_many_functions")
  const names = new Set<string>()
  for (const tool of tools) {
    if (tool.name.trim().length === 0) return Option.some("blank_function_name")
    if (!fitsUtf8Bytes(tool.name, MaxFunctionNameBytes)) return Option.some("function_name_too_long")
    if (names.has(tool.name)) return Option.some("duplicate_function")
    names.add(tool.name)
  }
  const deferred = tools.some((t) => t.defer_loading === true)
  if ((config.tool_search === true) !== deferred) return Option.some("tool_search_pairing")
  return Option.none()
}

/** Why an executable execution_prepare configuration is invalid (reply: `invalid_configuration`). */
export type PreparationConfigurationIssue =
  | "run_id_present"
  | "input_present"
  | "conversation_id_present"
  | "workspace_authoring"
  | "agent_state_key_mismatch"
  | "strict_resume_required"
  | ConfigurationIssue

/** The agent_state_key Core sets for a prepared Session. */
export const agentStateKeyFor = (sessionId: string): string => `agents-api-${sessionId}`

/** Rules for an executable preparation (`workspace_read_only` false): no Run identity or input, strict resume. */
export const validatePreparationConfiguration = (
  sessionId: string,
  config: PromptRequestPayload
): Option.Option<PreparationConfigurationIssue> => {
  if (config.run_id !== "") return Option.some("run_id_present")
  if (config.input !== undefined && config.input.length > 0) return Option.some("input_present")
  if (config.conversation_id !== "") return Option.some("conversation_id_present")
  if (config.workspace_authoring === true) return Option.some("workspace_authoring")
  if (config.agent_state_key !== agentStateKeyFor(sessionId)) return Option.some("agent_state_key_mismatch")
  if (config.strict_resume !== true) return Option.some("strict_resume_required")
  return validateConfiguration(config)
}

/**
 * The read-only preparation profile (`workspace_read_only: true`): exactly the bound Environment and
 * resource identity. Returns the first forbidden or missing member (reply: `unsupported_read_preparation`).
 */
export const validateReadOnlyConfiguration = (config: PromptRequestPayload): Option.Option<string> => {
  if (config.workspace_read_only !== true) return Option.some("workspace_read_only")
  if (config.local_environment === undefined) return Option.some("local_environment")
  if ((config.agent_state_key ?? "") === "") return Option.some("agent_state_key")
  if (config.strict_resume !== true) return Option.some("strict_resume")
  if (config.release_on_completion !== true) return Option.some("release_on_completion")
  const forbidden: Array<[string, boolean]> = [
    ["run_id", config.run_id !== ""],
    ["conversation_id", config.conversation_id !== ""],
    ["agent_session_id", (config.agent_session_id ?? "") !== ""],
    ["input", config.input !== undefined && config.input.length > 0],
    ["require_existing_native_session", config.require_existing_native_session === true],
    ["workspace_authoring", config.workspace_authoring === true],
    ["disable_execution_environment", config.disable_execution_environment === true],
    ["agent_options", config.agent_options !== undefined && Object.keys(config.agent_options).length > 0],
    ["execution_controls", config.execution_controls !== undefined],
    ["mcp_http_servers", config.mcp_http_servers !== undefined && config.mcp_http_servers !== null],
    ["function_tools", (config.function_tools ?? []).length > 0],
    ["tool_search", config.tool_search === true],
    ["observe_messages", config.observe_messages === true],
    ["observe_tool_observations", config.observe_tool_observations === true],
    ["observe_subagent_identities", config.observe_subagent_identities === true]
  ]
  const hit = forbidden.find(([, present]) => present)
  return hit === undefined ? Option.none() : Option.some(hit[0])
}

/**
 * The capabilities a request needs from the declaration it was admitted with. The Runtime checks this
 * snapshot before any native call; Core's admission policy adds its engine-profile rules on top.
 */
export const requiredCapabilities = (config: PromptRequestPayload): ReadonlyArray<CapabilityName> => {
  const need = new Set<CapabilityName>()
  const controls = config.execution_controls
  if (controls !== undefined) {
    need.add("execution_controls")
    if (controls.web_search === "enabled") need.add("web_search_control")
    if (controls.text_verbosity !== "medium") need.add("text_verbosity")
    if (controls.disable_programmatic_tool_calling === true) need.add("programmatic_tool_calling_disable")
    if (controls.output_format !== undefined) need.add("structured_output")
  }
  if (config.observe_messages === true) need.add("message_items")
  if (config.observe_tool_observations === true) need.add("tool_observations")
  if (config.observe_subagent_identities === true) need.add("subagent_observations")
  if (config.disable_subagents === true) need.add("subagent_control")
  if (config.disable_execution_environment === true) need.add("environment_none")
  if (config.local_environment !== undefined) need.add("local_environment")
  if (config.workspace_read_only === true) need.add("workspace_read_preparation")
  if (config.require_existing_native_session === true) need.add("native_session_recovery")
  if (config.strict_resume === true || config.release_on_completion === true) need.add("durable_turns")
  if ((config.function_tools ?? []).length > 0) need.add("function_tools")
  if (config.tool_search === true) need.add("tool_search")
  if (config.workspace_authoring === true) need.add("workspace_authoring")
  const servers = config.mcp_http_servers ?? []
  if (servers.length > 0) need.add("mcp_http_tools")
  if (servers.some((s) => s.required === true)) need.add("mcp_http_required")
  if (servers.some((s) => s.bearer_token !== undefined && s.bearer_token !== "")) need.add("mcp_http_bearer_auth")
  if (config.input !== undefined && hasImages(config.input)) need.add("message_images")
  return [...need]
}

/**
 * Resolves the Run id of a prompt_request: the envelope id wins; the payload's `run_id` is the fallback. None
 * when both are blank, or when the id exceeds the 128-byte correlation bound (it could never be echoed).
 */
export const resolvePromptRunId = (envelopeId: string | undefined, config: PromptRequestPayload): Option.Option<string> => {
  const id = envelopeId !== undefined && envelopeId.trim() !== "" ? envelopeId : config.run_id
  return id.trim() === "" || !fitsUtf8Bytes(id, MaxCorrelationIdBytes) ? Option.none() : Option.some(id)
}

/** True for a canonical UUID (the form Core uses for Session and Environment ids). */
export const isCanonicalUuid = isCanonicalUuidString
