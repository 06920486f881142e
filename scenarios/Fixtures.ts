/**
 * Shared values of the wire scenarios: the `scripted` agent kind and its complete capability declaration,
 * Session identities, the execution configuration Core sends, scripted-harness input and the common message
 * templates. Data only (imports `src/proto` types and the scenario language).
 *
 * Every capability field is listed by name: a new field fails to compile here until a decision is written,
 * like the reference's shared capability fixture.
 */
import type { AgentKindCapabilities, CapabilityName } from "../src/proto/Capabilities.js"
import type { PromptRequestPayload } from "../src/proto/Execution.js"
import type { MessageInput } from "../src/proto/MessageInput.js"
import type { PreparationStatusPayload } from "../src/proto/Preparation.js"
import type { Usage } from "../src/proto/RunEvents.js"
import {
  any,
  bind,
  core,
  type CoreStep,
  frame,
  optional,
  runtime,
  type RuntimeMessage,
  type RuntimeStep
} from "./WireScenario.js"

/** The controlled adapter every Runtime under test provides (the daemon's built-in `scripted` harness). */
export const AgentKind = "scripted"

/**
 * The scripted harness's production declaration, as the daemon's heartbeat must spell it: every field
 * supported except the four this daemon refuses for certain (workspace reads and exports, authoring, a local
 * Environment binding).
 */
export const scriptedCapabilities = {
  subagent_observations: true,
  streaming: true,
  permissions: true,
  usage: true,
  resume: true,
  native_session_recovery: true,
  workspace_authoring: false,
  steering: true,
  message_items: true,
  tool_observations: true,
  environment_none: true,
  local_environment: false,
  preparation: true,
  workspace_read_preparation: false,
  workspace_output_export: false,
  programmatic_tool_calling_disable: true,
  web_search_control: true,
  execution_controls: true,
  text_verbosity: true,
  structured_output: true,
  tool_search: true,
  message_images: true,
  function_result_images: true,
  subagent_control: true,
  durable_input_receipts: true,
  durable_turns: true,
  function_tools: true,
  mcp_http_tools: true,
  mcp_http_required: true,
  mcp_http_bearer_auth: true
} as const satisfies AgentKindCapabilities

/** The scripted declaration with some more fields declared unsupported. */
export const narrowedCapabilities = (disabled: ReadonlyArray<CapabilityName>): AgentKindCapabilities => {
  const out: Record<string, boolean> = { ...scriptedCapabilities }
  for (const name of disabled) out[name] = false
  return out as AgentKindCapabilities
}

/** Names of the supported fields of a declaration, in declaration order. */
export const supportedOf = (caps: AgentKindCapabilities): ReadonlyArray<CapabilityName> =>
  (Object.keys(scriptedCapabilities) as Array<CapabilityName>).filter((name) => caps[name])

// ---------------------------------------------------------------------------------------------- identities

export const SessionA = "b0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a69"
export const SessionB = "5c3f2a10-8e4d-4b6a-9c7e-2d1f0e9b8a76"

// ---------------------------------------------------------------------------------------------- input

/** One text message. */
export const text = (s: string): MessageInput => [{ content: [{ type: "input_text", text: s }] }]

/**
 * One step of the scripted harness's Turn script (`{"script": [steps]}` as the input text). See the README
 * section "The scripted harness" for every step; the common ones: `{"delta": s}`, `{"thinking": s}`,
 * `{"tool_call": {...}}`, `{"usage": {...}}`, `{"error": {...}}`, `{"hang": true}`, `{"wait": name}`,
 * `{"cancel_settles_on": name}`, `{"await_steer": n}`, `{"permission": {...}}`, `{"ask": {...}}`,
 * `{"function_call": {...}}`, `{"close_fails": n}`, `{"cancel_ignored": true}`.
 */
export type ScriptStep = { readonly [key: string]: unknown }

/** A Turn input that runs a script on the scripted harness. */
export const script = (...steps: ReadonlyArray<ScriptStep>): MessageInput => text(JSON.stringify({ script: steps }))

// ---------------------------------------------------------------------------------------------- configuration

export interface ConfigurationOptions {
  /** Opt-in observe_messages (Core sets it when the Harness declares message_items). Default true. */
  readonly observeMessages?: boolean
  readonly functionTools?: PromptRequestPayload["function_tools"]
  /**
   * Preparation behaviour of the scripted harness (`agent_options.scripted`): `prepare: "fail"`,
   * `prepare_wait: signal`, `close_fails: n`, …
   */
  readonly scripted?: { readonly [key: string]: string | number }
  /** Public MCP servers (`mcp_http_servers`), exactly as Core's builder writes them. */
  readonly mcpHttpServers?: PromptRequestPayload["mcp_http_servers"]
}

/** The fields Core sets on every execution for an Environment of type none with multi-agent disabled. */
const commonConfiguration = (options: ConfigurationOptions) => ({
  agent_options: {
    model: "scripted-model",
    system_prompt: "Be brief.",
    ...(options.scripted === undefined ? {} : { scripted: options.scripted })
  },
  execution_controls: { web_search: "disabled", text_verbosity: "medium" },
  release_on_completion: true,
  strict_resume: true,
  ...(options.observeMessages === false ? {} : { observe_messages: true }),
  observe_tool_observations: true,
  ...(options.functionTools === undefined ? {} : { function_tools: options.functionTools }),
  ...(options.mcpHttpServers === undefined ? {} : { mcp_http_servers: options.mcpHttpServers }),
  disable_execution_environment: true,
  disable_subagents: true
}) as const

/** The immutable configuration of execution_prepare for a Session (no Run id, no input). */
export const preparedConfiguration = (
  session: string,
  options: ConfigurationOptions = {}
): PromptRequestPayload => ({
  agent_kind: AgentKind,
  conversation_id: "",
  run_id: "",
  agent_state_key: `agents-api-${session}`,
  ...commonConfiguration(options)
})

/**
 * A prompt_request payload: a Run started directly, without an admission. Core sets the Session's state key
 * on every request, direct ones included.
 */
export const promptPayload = (
  run: string,
  input: MessageInput,
  options: ConfigurationOptions & { readonly session?: string } = {}
): PromptRequestPayload => ({
  agent_kind: AgentKind,
  conversation_id: "",
  run_id: run,
  input,
  agent_state_key: `agents-api-${options.session ?? SessionA}`,
  ...commonConfiguration(options)
})

// ---------------------------------------------------------------------------------------------- common steps

/** The heartbeat the scripted harness's Runtime sends: liveness plus the complete declaration. */
export const heartbeat = (
  options: { readonly activeRequests?: number; readonly capabilities?: AgentKindCapabilities; readonly available?: boolean } = {}
): RuntimeStep =>
  runtime({
    type: "heartbeat",
    payload: {
      ts: any(1_760_000_000),
      active_requests: options.activeRequests ?? 0,
      daemon_version: optional(any()),
      supported_agent_kinds: [
        {
          kind: AgentKind,
          available: options.available ?? true,
          version: optional(any()),
          capabilities: options.capabilities ?? scriptedCapabilities
        }
      ]
    }
  })

/**
 * The declaration without `message_items`. Core sets `observe_messages` exactly when the Runtime declares
 * `message_items`.
 */
export const noMessageItems: ReadonlyArray<CapabilityName> = ["message_items"]

/**
 * The first heartbeat of a scenario whose Runs report plain deltas (no message boundaries): on Core's side the
 * scripted Runtime declares everything but `message_items`, so Core never sets `observe_messages`; on the
 * Runtime's side the Runtime keeps its full declaration (the opt-in is simply not set), so any Runtime with the
 * default scripted harness can replay it.
 */
export const plainHeartbeat = (options: { readonly activeRequests?: number } = {}): ReadonlyArray<RuntimeStep> => [
  { ...heartbeat(options), sides: ["runtime"] },
  { ...heartbeat({ ...options, capabilities: narrowedCapabilities(noMessageItems) }), sides: ["core"] }
]

export const prepare = (request: string, session: string, options: ConfigurationOptions = {}): CoreStep =>
  core({ type: "execution_prepare", id: request, payload: { session_id: session, configuration: preparedConfiguration(session, options) } })

export const start = (request: string, run: string, input: MessageInput, names: AdmissionNames = admissionNames(request)): CoreStep =>
  core({
    type: "execution_start",
    id: request,
    payload: { executor_id: bind(names.executor, "executor-1"), handle: bind(names.handle, "handle-1"), run_id: run, input }
  })

export const release = (request: string, names: AdmissionNames = admissionNames(request)): CoreStep =>
  core({ type: "execution_release", id: request, payload: { handle: bind(names.handle, "handle-1") } })

export const promptRequest = (
  run: string,
  input: MessageInput,
  options: ConfigurationOptions & { readonly session?: string } = {}
): CoreStep =>
  core({ type: "prompt_request", id: run, payload: promptPayload(run, input, options) })

/** The binding names of one admission's Runtime-generated values. */
export interface AdmissionNames {
  readonly executor: string
  readonly handle: string
  readonly expires: string
}
export const admissionNames = (request: string): AdmissionNames => ({
  executor: `${request}.executor_id`,
  handle: `${request}.handle`,
  expires: `${request}.expires_at`
})

/**
 * A resource status of one admission. Every resource status carries the Executor id and the handle, bound to
 * the first values the Runtime sends; every status from `ready` on also carries the expiry, fixed at the
 * grant (`preparing`, and a `failed` before the grant, have none). The Go fixture puts an expiry on
 * `preparing` too; the protocol says `ready` supplies it (docs/scenarios.md).
 */
export const statusFrame = (
  request: string,
  revision: number,
  state: Exclude<PreparationStatusPayload["state"], "rejected">,
  extra: {
    readonly run_id?: string
    readonly error_code?: NonNullable<PreparationStatusPayload["error_code"]>
    readonly reused?: boolean
    /** Whether the admission was granted (has an expiry); default: every state but `preparing`. */
    readonly granted?: boolean
  } = {},
  names: AdmissionNames = admissionNames(request)
): RuntimeMessage => {
  const { granted, ...members } = extra
  return frame({
    type: "preparation_status",
    id: request,
    payload: {
      executor_id: bind(names.executor, "executor-1"),
      ...(members.reused === undefined ? {} : { reused: members.reused }),
      handle: bind(names.handle, "handle-1"),
      revision,
      state,
      ...((granted ?? state !== "preparing") ? { expires_at: bind(names.expires, 300_000) } : {}),
      ...(members.run_id === undefined ? {} : { run_id: members.run_id }),
      ...(members.error_code === undefined ? {} : { error_code: members.error_code })
    }
  })
}

export const status = (...args: Parameters<typeof statusFrame>): RuntimeStep => ({ _tag: "Runtime", message: statusFrame(...args) })

/** A rejected control operation: no handle, revision 0, the operation and a finite code. */
export const rejected = (
  request: string,
  operation: "execution_prepare" | "execution_start" | "execution_release",
  code: NonNullable<PreparationStatusPayload["error_code"]>
): RuntimeStep =>
  runtime({ type: "preparation_status", id: request, payload: { revision: 0, state: "rejected", error_code: code, operation } })

// ---------------------------------------------------------------------------------------------- Run frames

/** The binding name of the n-th native message of a Run (the scripted harness numbers them `msg_1`, …). */
export const messageToken = (n: number) => bind(`msg-${n}`, `msg_${n}`)

/** `output_message` in_progress: a native message opens (observe_messages). */
export const openMessage = (run: string, n: number): RuntimeMessage =>
  frame({ type: "output_message", id: run, payload: { id: messageToken(n), status: "in_progress" } })

/** `output_message` completed with the message's complete text. */
export const completeMessage = (run: string, n: number, text: string): RuntimeMessage =>
  frame({ type: "output_message", id: run, payload: { id: messageToken(n), status: "completed", text } })

/** A text fragment; `message` is the native message it belongs to when the Run observes messages. */
export const deltaFrame = (run: string, delta: string, sequence: number, message?: number): RuntimeMessage =>
  frame({
    type: "delta",
    id: run,
    payload: message === undefined ? { delta, sequence } : { item_id: messageToken(message), delta, sequence }
  })

/**
 * The terminal frame of a scripted Run: the full content, the last usage snapshot when one was reported, and
 * the native Session the scripted harness names after its Executor (bound to the first value seen).
 */
export const doneFrame = (run: string, content: string, usage?: Usage, session = "native-session"): RuntimeMessage =>
  frame({
    type: "done",
    id: run,
    payload: {
      content,
      ...(usage === undefined ? {} : { usage }),
      metadata: { agent_session_id: bind(session, "scripted-executor-1"), agent_session_type: "scripted" }
    }
  })
