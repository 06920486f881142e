/**
 * Core's capability admission policy (protocol "Capability declarations", table "Core requires it when …").
 *
 * One pure function, `admit`, over the Harness's engine profile, the Agent / Session configuration, the
 * Environment type and binding, request facts, and the selected connection's latest declaration. Device
 * selection (`selectDevice`) and the final check before a Turn is claimed both call it. An unsupported
 * capability or an invalid binding is a definite rejection before any operation; the policy never picks
 * another Harness kind.
 *
 * Never: infer capabilities before the first heartbeat; admit a kind missing from the heartbeat; treat a
 * `permissions`, `workspace_authoring`, `usage` or `resume` declaration as an admission rule (Core has none).
 */
import { Option, Redacted, Result } from "effect"
import { Capabilities, type Execution } from "../proto/index.js"
import type { Declaration } from "./DeviceSession.js"
import {
  type AdmissionRejection,
  BindingInvalid,
  CapabilitiesUndeclared,
  CapabilityUnsupported,
  HarnessUnavailable
} from "./Outcome.js"

type CapabilityName = Capabilities.CapabilityName

// ---------------------------------------------------------------------------------------------- inputs

/**
 * What Core knows about a Harness engine (Core-side configuration, not a wire fact): which engine-neutral
 * controls it declares, and which public features it qualifies. A public feature the Agent or request uses is
 * admitted only when the Runtime declares its capabilities and the profile qualifies the feature.
 */
export interface EngineProfile {
  readonly controls: {
    readonly web_search: boolean
    readonly text_verbosity: boolean
  }
  readonly qualifies: ReadonlySet<PublicFeature>
}

/** Public features that need the engine profile's qualification (text verbosity is qualified by its control). */
export type PublicFeature =
  | "structured_output"
  | "multi_agent"
  | "tool_search"
  | "programmatic_tool_calling_disable"
  | "function_tools"
  | "message_images"
  | "function_result_images"
  | "mcp_http_tools"
  | "mcp_http_required"
  | "mcp_http_bearer_auth"

export const publicFeatures: ReadonlyArray<PublicFeature> = [
  "structured_output",
  "multi_agent",
  "tool_search",
  "programmatic_tool_calling_disable",
  "function_tools",
  "message_images",
  "function_result_images",
  "mcp_http_tools",
  "mcp_http_required",
  "mcp_http_bearer_auth"
]

/** True when the engine profile qualifies a feature (a non-default verbosity is qualified by the verbosity control). */
export const isQualified = (engine: EngineProfile, feature: PublicFeature | "text_verbosity"): boolean =>
  feature === "text_verbosity" ? engine.controls.text_verbosity : engine.qualifies.has(feature)

/** An HTTP MCP server the Agent declares. The Vault credential stays Redacted until the request is built. */
export interface AgentMcpServer {
  readonly server_label: string
  readonly server_url: string
  /** null allows every tool; [] allows none. */
  readonly allowed_tools: ReadonlyArray<string> | null
  readonly required: boolean
  /** Absent: Core freezes the public default (service for type none, environment otherwise). */
  readonly connection_origin?: Execution.ConnectionOrigin
  /** The selected Vault credential's transient value. Never logged, never persisted. */
  readonly vault_credential?: Redacted.Redacted<string>
}

/** The Agent / Session configuration facts the table reads. */
export interface AgentConfiguration {
  readonly multi_agent: { readonly enabled: boolean; readonly max_concurrent_subagents?: number }
  /** json_schema structured output. */
  readonly output_format?: Execution.OutputFormat
  readonly tool_search: boolean
  readonly function_tools: ReadonlyArray<Execution.FunctionTool>
  /** The Agent explicitly disables programmatic tool calling. */
  readonly disable_programmatic_tool_calling: boolean
  readonly mcp_http_servers: ReadonlyArray<AgentMcpServer>
  /** Absent: medium. Anything else needs the engine's verbosity control. */
  readonly text_verbosity?: Execution.TextVerbosity
}

export type EnvironmentType = "none" | "openai_hosted" | "self_hosted"

/** The Environment of the Session: type none, or a hosted type with its exact binding. */
export type EnvironmentBinding =
  | { readonly type: "none" }
  | { readonly type: "openai_hosted" | "self_hosted"; readonly binding: Execution.LocalEnvironment | undefined }

/** Continuity facts of the Session. */
export interface SessionFacts {
  /** A Turn of this Session has started before. */
  readonly has_started_turn: boolean
  /** The native Session id Core recorded from an earlier done or cancellation receipt. */
  readonly native_session_id: string | undefined
}

/** Facts of this particular request. */
export interface RequestFacts {
  readonly message_images: boolean
  readonly function_result_images: boolean
}

/** What is being admitted: a Turn's execution, or an idle Files directory read (read-only preparation). */
export type Operation = "execution" | "idle_directory_read"

export interface AdmissionInput {
  readonly operation: Operation
  readonly agent_kind: string
  readonly engine: EngineProfile
  readonly agent: AgentConfiguration
  readonly environment: EnvironmentBinding
  readonly session: SessionFacts
  readonly request: RequestFacts
}

/** The part of a connection's declaration the policy reads. */
export type DeclarationSnapshot = Pick<Declaration, "kinds">

/** An admitted request: the declaration it was admitted with (the Turn keeps it) and what it required. */
export interface Admitted {
  readonly kind: string
  readonly capabilities: Capabilities.AgentKindCapabilities
  readonly required: ReadonlyArray<CapabilityName>
}

// ---------------------------------------------------------------------------------------------- the table

/** One row of the design document's table: the capabilities it requires, when, and the public feature behind it. */
export interface Row {
  readonly name: string
  readonly capabilities: ReadonlyArray<CapabilityName>
  readonly when: (input: AdmissionInput) => boolean
  /** Set for rows a public feature triggers: the engine profile must qualify it. */
  readonly feature?: (input: AdmissionInput) => PublicFeature | "text_verbosity" | undefined
}

const isHosted = (env: EnvironmentBinding) => env.type === "openai_hosted" || env.type === "self_hosted"
const deferred = (agent: AgentConfiguration) => agent.function_tools.some((t) => t.defer_loading === true)

/** The rows, in the design document's order. Tests iterate them one by one. */
export const rows: ReadonlyArray<Row> = [
  {
    name: "always",
    capabilities: Capabilities.alwaysRequired,
    when: (i) => i.operation === "execution"
  },
  { name: "environment_none", capabilities: ["environment_none"], when: (i) => i.operation === "execution" && i.environment.type === "none" },
  {
    name: "hosted_environment",
    capabilities: ["local_environment", "workspace_read_preparation", "workspace_output_export"],
    when: (i) => i.operation === "execution" && isHosted(i.environment)
  },
  { name: "idle_directory_read", capabilities: ["workspace_read_preparation"], when: (i) => i.operation === "idle_directory_read" },
  {
    name: "native_session_recovery",
    capabilities: ["native_session_recovery"],
    when: (i) => i.operation === "execution" && needsNativeSessionRecovery(i.session)
  },
  { name: "web_search_control", capabilities: ["web_search_control"], when: (i) => i.operation === "execution" && i.engine.controls.web_search },
  {
    name: "text_verbosity",
    capabilities: ["text_verbosity"],
    // Required when the engine declares the control; a non-default verbosity needs it too, and the control.
    when: (i) =>
      i.operation === "execution" &&
      (i.engine.controls.text_verbosity || (i.agent.text_verbosity ?? "medium") !== "medium"),
    feature: (i) => ((i.agent.text_verbosity ?? "medium") !== "medium" ? "text_verbosity" : undefined)
  },
  {
    name: "json_schema_output",
    capabilities: ["structured_output", "message_items"],
    when: (i) => i.operation === "execution" && i.agent.output_format !== undefined,
    feature: () => "structured_output"
  },
  {
    name: "multi_agent_enabled",
    capabilities: ["subagent_observations"],
    when: (i) => i.operation === "execution" && i.agent.multi_agent.enabled,
    feature: () => "multi_agent"
  },
  { name: "multi_agent_disabled", capabilities: ["subagent_control"], when: (i) => i.operation === "execution" && !i.agent.multi_agent.enabled },
  {
    name: "tool_search",
    capabilities: ["tool_search"],
    when: (i) => i.operation === "execution" && (i.agent.tool_search || deferred(i.agent)),
    feature: () => "tool_search"
  },
  {
    name: "programmatic_tool_calling_disable",
    capabilities: ["programmatic_tool_calling_disable"],
    when: (i) => i.operation === "execution" && i.agent.disable_programmatic_tool_calling,
    feature: () => "programmatic_tool_calling_disable"
  },
  {
    name: "function_tools",
    capabilities: ["function_tools"],
    when: (i) => i.operation === "execution" && i.agent.function_tools.length > 0,
    feature: () => "function_tools"
  },
  {
    name: "message_images",
    capabilities: ["message_images"],
    when: (i) => i.operation === "execution" && i.request.message_images,
    feature: () => "message_images"
  },
  {
    name: "function_result_images",
    capabilities: ["function_result_images"],
    when: (i) => i.operation === "execution" && i.request.function_result_images,
    feature: () => "function_result_images"
  },
  {
    name: "mcp_http_tools",
    capabilities: ["mcp_http_tools"],
    when: (i) => i.operation === "execution" && i.agent.mcp_http_servers.length > 0,
    feature: () => "mcp_http_tools"
  },
  {
    name: "mcp_http_required",
    capabilities: ["mcp_http_required"],
    when: (i) => i.operation === "execution" && i.agent.mcp_http_servers.some((s) => s.required),
    feature: () => "mcp_http_required"
  },
  {
    name: "mcp_http_bearer_auth",
    capabilities: ["mcp_http_bearer_auth"],
    when: (i) => i.operation === "execution" && i.agent.mcp_http_servers.some((s) => s.vault_credential !== undefined),
    feature: () => "mcp_http_bearer_auth"
  }
]

/** A Session with a started Turn and no recorded native Session id must recover its native Session. */
export const needsNativeSessionRecovery = (session: SessionFacts): boolean =>
  session.has_started_turn && (session.native_session_id === undefined || session.native_session_id === "")

/** The connection origin Core freezes for a server without an explicit one. */
export const effectiveOrigin = (server: AgentMcpServer, env: EnvironmentBinding): Execution.ConnectionOrigin =>
  server.connection_origin ?? (env.type === "none" ? "service" : "environment")

/** Binding checks that hold for every device (the request itself is wrong). */
export const checkBinding = (input: AdmissionInput): Option.Option<BindingInvalid> => {
  const env = input.environment
  if (input.operation === "idle_directory_read") {
    if (env.type === "none") return Option.some(new BindingInvalid({ reason: "no_workspace_binding" }))
    if (env.binding === undefined) return Option.some(new BindingInvalid({ reason: "missing_binding" }))
    return Option.none()
  }
  if (env.type !== "none" && env.binding === undefined) return Option.some(new BindingInvalid({ reason: "missing_binding" }))
  for (const server of input.agent.mcp_http_servers) {
    const origin = effectiveOrigin(server, env)
    if (origin === "service" && env.type !== "none") return Option.some(new BindingInvalid({ reason: "mcp_origin_service" }))
    if (origin === "environment" && (env.type === "none" || env.binding?.network_access !== "enabled")) {
      return Option.some(new BindingInvalid({ reason: "mcp_origin_environment" }))
    }
  }
  return Option.none()
}

/** Every capability the table requires for this input, in row order, without duplicates. */
export const requiredCapabilities = (input: AdmissionInput): ReadonlyArray<CapabilityName> => {
  const out: Array<CapabilityName> = []
  for (const row of rows) {
    if (!row.when(input)) continue
    for (const name of row.capabilities) if (!out.includes(name)) out.push(name)
  }
  return out
}

/**
 * Admits or refuses one request against one connection's declaration. Order: binding (no device can fix
 * it), then unknown capabilities (no heartbeat yet), then the kind (advertised, and available for an
 * execution), then every required capability in row order: declared by the Runtime, and qualified by the
 * engine profile when it is a public feature. The first refusal is returned.
 */
export const admit = (
  input: AdmissionInput,
  declaration: Option.Option<DeclarationSnapshot>
): Result.Result<Admitted, AdmissionRejection> => {
  const binding = checkBinding(input)
  if (Option.isSome(binding)) return Result.fail(binding.value)
  if (Option.isNone(declaration)) return Result.fail(new CapabilitiesUndeclared({ kind: input.agent_kind }))
  const descriptor = declaration.value.kinds.get(input.agent_kind)
  if (descriptor === undefined) {
    return Result.fail(new HarnessUnavailable({ kind: input.agent_kind, reason: "not_advertised" }))
  }
  if (input.operation === "execution" && !descriptor.available) {
    return Result.fail(new HarnessUnavailable({ kind: input.agent_kind, reason: "unavailable" }))
  }
  const required: Array<CapabilityName> = []
  for (const row of rows) {
    if (!row.when(input)) continue
    for (const capability of row.capabilities) {
      if (!descriptor.capabilities[capability]) {
        return Result.fail(new CapabilityUnsupported({ kind: input.agent_kind, capability, source: "declaration" }))
      }
      if (!required.includes(capability)) required.push(capability)
    }
    const feature = row.feature?.(input)
    if (feature !== undefined && !isQualified(input.engine, feature)) {
      return Result.fail(
        new CapabilityUnsupported({ kind: input.agent_kind, capability: row.capabilities[0]!, source: "engine_profile" })
      )
    }
  }
  return Result.succeed({ kind: input.agent_kind, capabilities: descriptor.capabilities, required })
}

/**
 * Checks one capability of an admitted snapshot during a Turn (active input or a function result carrying
 * images), with the feature's engine qualification.
 */
export const requireFeature = (
  admitted: Admitted,
  engine: EngineProfile,
  capability: Extract<CapabilityName, "message_images" | "function_result_images">
): Result.Result<void, CapabilityUnsupported> => {
  if (!admitted.capabilities[capability]) {
    return Result.fail(new CapabilityUnsupported({ kind: admitted.kind, capability, source: "declaration" }))
  }
  if (!isQualified(engine, capability)) {
    return Result.fail(new CapabilityUnsupported({ kind: admitted.kind, capability, source: "engine_profile" }))
  }
  return Result.succeed(undefined)
}

// ---------------------------------------------------------------------------------------------- device selection

export interface DeviceCandidate<D> {
  readonly device: D
  readonly declaration: Option.Option<DeclarationSnapshot>
}

/**
 * Connected devices that are not among the candidates, as counts (the gateway's kind index walks only the
 * devices advertising the Agent's kind): `declared` have a declaration without the kind (each would refuse
 * with HarnessUnavailable(not_advertised)), `undeclared` have none yet (CapabilitiesUndeclared).
 */
export interface OtherDevices {
  readonly declared: number
  readonly undeclared: number
}

/**
 * Picks the first candidate whose declaration admits the request (candidates all run the Agent's Harness
 * kind; this never substitutes another kind). When none admits, returns one refusal chosen by what helps the
 * caller most: an invalid binding (no device can help), else a definite CapabilityUnsupported, else
 * HarnessUnavailable, else CapabilitiesUndeclared, counting `others` (devices left out of `candidates`) after
 * the candidates. With no candidates and no others: HarnessUnavailable(not_advertised).
 */
export const selectDevice = <D>(
  input: AdmissionInput,
  candidates: ReadonlyArray<DeviceCandidate<D>>,
  others: OtherDevices = { declared: 0, undeclared: 0 }
): Result.Result<{ readonly device: D; readonly admitted: Admitted }, AdmissionRejection> => {
  const binding = checkBinding(input)
  if (Option.isSome(binding)) return Result.fail(binding.value)
  const rank = (e: AdmissionRejection) =>
    e._tag === "CapabilityUnsupported" ? 0 : e._tag === "HarnessUnavailable" ? 1 : e._tag === "CapabilitiesUndeclared" ? 2 : 3
  let best: AdmissionRejection | undefined
  const consider = (e: AdmissionRejection) => {
    if (best === undefined || rank(e) < rank(best)) best = e
  }
  for (const candidate of candidates) {
    const result = admit(input, candidate.declaration)
    if (Result.isSuccess(result)) return Result.succeed({ device: candidate.device, admitted: result.success })
    consider(result.failure)
  }
  if (others.declared > 0) consider(new HarnessUnavailable({ kind: input.agent_kind, reason: "not_advertised" }))
  if (others.undeclared > 0) consider(new CapabilitiesUndeclared({ kind: input.agent_kind }))
  return Result.fail(best ?? new HarnessUnavailable({ kind: input.agent_kind, reason: "not_advertised" }))
}

/** Reads the Vault credential at the one place the request is built. */
export const credentialValue = (server: AgentMcpServer): string | undefined =>
  server.vault_credential === undefined ? undefined : Redacted.value(server.vault_credential)
