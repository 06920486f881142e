/**
 * Fixtures for Core's policy, request, delivery and input tests (test-only). The baseline is an execution
 * on Environment type none with multi-agent disabled: it needs the seven "always" capabilities,
 * environment_none and subagent_control, and nothing else.
 */
import { Option, Redacted } from "effect"
import type {
  AdmissionInput,
  AgentConfiguration,
  AgentMcpServer,
  DeclarationSnapshot,
  EngineProfile
} from "../../../src/core/CapabilityPolicy.js"
import { publicFeatures } from "../../../src/core/CapabilityPolicy.js"
import type { ExecutionSpec } from "../../../src/core/ExecutionRequest.js"
import { type Capabilities, Execution, Ids } from "../../../src/proto/index.js"
import { alwaysRequiredOnly, declaration, descriptor, type Overrides } from "../../support/capabilities.js"

export const SESSION = Ids.unsafeMake.sessionId("b0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a69")
export const KIND = "codex"

export const engine = (overrides: Partial<EngineProfile> = {}): EngineProfile => ({
  controls: { web_search: false, text_verbosity: false },
  qualifies: new Set(publicFeatures),
  ...overrides
})

export const agent = (overrides: Partial<AgentConfiguration> = {}): AgentConfiguration => ({
  multi_agent: { enabled: false },
  tool_search: false,
  function_tools: [],
  disable_programmatic_tool_calling: false,
  mcp_http_servers: [],
  ...overrides
})

export const binding = (overrides: Partial<Execution.LocalEnvironment> = {}): Execution.LocalEnvironment => ({
  id: "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9",
  workspace_directory: "/workspace",
  capability_sources: null,
  network_access: "enabled",
  ...overrides
})

export const admissionInput = (overrides: Partial<AdmissionInput> = {}): AdmissionInput => ({
  operation: "execution",
  agent_kind: KIND,
  engine: engine(),
  agent: agent(),
  environment: { type: "none" },
  session: { has_started_turn: false, native_session_id: undefined },
  request: { message_images: false, function_result_images: false },
  ...overrides
})

/** Capabilities the baseline input needs. */
export const baselineCaps: Overrides = { environment_none: true, subagent_control: true }

/** A declaration snapshot with one kind. */
export const snapshot = (
  caps: Capabilities.AgentKindCapabilities,
  options: { readonly available?: boolean; readonly kind?: string } = {}
): Option.Option<DeclarationSnapshot> =>
  Option.some({
    kinds: new Map([[options.kind ?? KIND, descriptor(options.kind ?? KIND, caps, { available: options.available ?? true })]])
  })

export const baselineDeclaration = (extra: Overrides = {}) => alwaysRequiredOnly({ ...baselineCaps, ...extra })

export const fn = (name: string, defer = false): Execution.FunctionTool => ({
  name,
  description: `the ${name} function`,
  parameters: { type: "object" },
  ...(defer ? { defer_loading: true } : {})
})

export const mcp = (overrides: Partial<AgentMcpServer> = {}): AgentMcpServer => ({
  server_label: "docs",
  server_url: "https://mcp.example/docs",
  allowed_tools: null,
  required: false,
  ...overrides
})

export const secret = (value: string) => Redacted.make(value)

export const spec = (overrides: Partial<ExecutionSpec> = {}): ExecutionSpec => ({
  session_id: SESSION,
  agent_kind: KIND,
  agent_options: { model: "gpt-5" },
  engine: engine(),
  agent: agent(),
  environment: { type: "none" },
  session: { has_started_turn: false, native_session_id: undefined },
  ...overrides
})

export { declaration }
