/**
 * Builds the requests of a Turn with the opt-ins Core sets for each Run (protocol "Capability declarations",
 * table "Set by Core"): the execution configuration of `execution_prepare`, the `prompt_request` of the
 * direct path, `execution_start` / `execution_release`, `prompt_steer` and `prompt_cancel`. Every builder
 * validates its result with the shared proto validators and the wire codec before anything is sent, and
 * checks that the capabilities the request needs (`Execution.requiredCapabilities`) are in the declaration
 * the Turn was admitted with.
 *
 * Never: a working directory in the request (the Runtime checks `workspace_directory` against its binding);
 * a Run id, conversation id or input in a preparation; a credential outside the one field that carries it
 * (the MCP bearer token is read from its Redacted value here and nowhere else; the built request is
 * secret-bearing and is never logged).
 */
import { Option, Result } from "effect"
import type { Checks, Ids } from "../proto/index.js"
import { Execution, InputFrame, MessageInput, Messages } from "../proto/index.js"
import {
  type AdmissionInput,
  type Admitted,
  type AgentConfiguration,
  credentialValue,
  effectiveOrigin,
  type EngineProfile,
  type EnvironmentBinding,
  needsNativeSessionRecovery,
  type Operation,
  type RequestFacts,
  type SessionFacts
} from "./CapabilityPolicy.js"
import { CapabilityUnsupported, ConfigurationRejected } from "./Outcome.js"

type PromptRequestPayload = Execution.PromptRequestPayload

/** Everything Core knows about the Session's execution, frozen for one Turn. */
export interface ExecutionSpec {
  readonly session_id: Ids.SessionId
  readonly agent_kind: string
  /** Opaque engine options (model, system prompt, provider). Secret-bearing: never logged. */
  readonly agent_options?: typeof Checks.JsonObject.Type
  readonly engine: EngineProfile
  readonly agent: AgentConfiguration
  readonly environment: EnvironmentBinding
  readonly session: SessionFacts
}

/** The admission policy's input for this spec. */
export const admissionInput = (
  spec: ExecutionSpec,
  request: RequestFacts,
  operation: Operation = "execution"
): AdmissionInput => ({
  operation,
  agent_kind: spec.agent_kind,
  engine: spec.engine,
  agent: spec.agent,
  environment: spec.environment,
  session: spec.session,
  request
})

const mcpServers = (agent: AgentConfiguration, env: EnvironmentBinding): Array<Execution.McpHttpServer> =>
  agent.mcp_http_servers.map((server) => {
    const token = credentialValue(server)
    return {
      connection_origin: effectiveOrigin(server, env),
      server_label: server.server_label,
      server_url: server.server_url,
      allowed_tools: server.allowed_tools === null ? null : [...server.allowed_tools],
      ...(server.required ? { required: true } : {}),
      ...(token === undefined ? {} : { bearer_token: token })
    }
  })

/** The execution controls Core always sends: web search disabled, the resolved verbosity, explicit opt-outs. */
export const executionControls = (agent: AgentConfiguration): Execution.ExecutionControls => ({
  web_search: "disabled",
  text_verbosity: agent.text_verbosity ?? "medium",
  ...(agent.disable_programmatic_tool_calling ? { disable_programmatic_tool_calling: true } : {}),
  ...(agent.output_format === undefined ? {} : { output_format: agent.output_format })
})

/**
 * The configuration with Core's opt-ins. `run` is absent for execution_prepare (empty run id, no input) and
 * present for the direct prompt_request path.
 */
export const configuration = (
  spec: ExecutionSpec,
  admitted: Admitted,
  run?: { readonly run_id: Ids.RunId; readonly input: MessageInput.MessageInput }
): PromptRequestPayload => {
  const { agent, environment, session } = spec
  const multi = agent.multi_agent
  return {
    ...(multi.enabled && multi.max_concurrent_subagents !== undefined
      ? { max_concurrent_subagents: multi.max_concurrent_subagents }
      : {}),
    agent_kind: spec.agent_kind,
    conversation_id: "",
    run_id: run?.run_id ?? "",
    ...(run === undefined ? {} : { input: run.input }),
    ...(spec.agent_options === undefined ? {} : { agent_options: spec.agent_options }),
    execution_controls: executionControls(agent),
    ...(agent.mcp_http_servers.length > 0 ? { mcp_http_servers: mcpServers(agent, environment) } : {}),
    ...(environment.type !== "none" && environment.binding !== undefined ? { local_environment: environment.binding } : {}),
    ...(session.native_session_id === undefined || session.native_session_id === ""
      ? {}
      : { agent_session_id: session.native_session_id }),
    agent_state_key: Execution.agentStateKeyFor(spec.session_id),
    release_on_completion: true,
    strict_resume: true,
    ...(needsNativeSessionRecovery(session) ? { require_existing_native_session: true } : {}),
    ...(admitted.capabilities.message_items ? { observe_messages: true } : {}),
    observe_tool_observations: true,
    ...(multi.enabled ? { observe_subagent_identities: true } : { disable_subagents: true }),
    ...(agent.function_tools.length > 0 ? { function_tools: [...agent.function_tools] } : {}),
    ...(agent.tool_search ? { tool_search: true } : {}),
    ...(environment.type === "none" ? { disable_execution_environment: true } : {})
  }
}

/** The capabilities the built request needs must all be in the admitted declaration. */
const checkAgainstAdmitted = (
  config: PromptRequestPayload,
  admitted: Admitted
): Result.Result<void, CapabilityUnsupported> => {
  for (const capability of Execution.requiredCapabilities(config)) {
    if (!admitted.capabilities[capability]) {
      return Result.fail(new CapabilityUnsupported({ kind: admitted.kind, capability, source: "declaration" }))
    }
  }
  return Result.succeed(undefined)
}

/** Runs the wire codec on the finished message: schema, frame size (a long input text is not escaped for it). Nothing is sent. */
const encodes = <M extends Messages.CoreToRuntime>(message: M): Result.Result<M, ConfigurationRejected> =>
  Result.match(InputFrame.checkMessage(message), {
    onFailure: (e) => Result.fail(new ConfigurationRejected({ issue: e.reason })),
    onSuccess: () => Result.succeed(message)
  })

const issue = <I extends string>(o: Option.Option<I>): Result.Result<void, ConfigurationRejected> =>
  Option.isSome(o) ? Result.fail(new ConfigurationRejected({ issue: o.value })) : Result.succeed(undefined)

/** The finished messages a Turn sends first. */
export type PrepareMessage = Messages.MessageOfType<"execution_prepare">
export type PromptMessage = Messages.MessageOfType<"prompt_request">

/**
 * Validates an initial or active input with the shared rules (definite, before anything is sent): the
 * MessageInput rules, then the public inline image profile for every image part.
 */
export const validateInput = (input: MessageInput.MessageInput): Result.Result<void, ConfigurationRejected> =>
  issue(inputIssue(input))

/**
 * The shared MessageInput rules (non-empty, meaningful content, no blank image reference) and the public
 * inline image profile (`data:image/png|jpeg;base64,…`, canonical base64, bytes of that format), as a finite
 * issue code: `input_<MessageInputIssue>` or `input_image_media_type` / `input_image_base64` /
 * `input_image_format_mismatch`.
 */
export type InputIssue = `input_${MessageInput.MessageInputIssue | MessageInput.ImageIssue}`

const inputIssue = (input: MessageInput.MessageInput): Option.Option<InputIssue> =>
  Option.orElse(
    Option.map(MessageInput.validateMessageInput(input), (i): InputIssue => `input_${i}`),
    () => Option.map(MessageInput.validateInlineImages(input), (i): InputIssue => `input_${i}`)
  )

/**
 * `execution_prepare` for a Session: the configuration with no Run identity and no input, validated with the
 * preparation rules and the codec. Fails definitely (nothing sent) when the configuration violates a shared
 * rule or needs a capability the admitted declaration lacks.
 */
export const executionPrepare = (
  requestId: Ids.PreparationRequestId,
  spec: ExecutionSpec,
  admitted: Admitted
): Result.Result<Messages.MessageOfType<"execution_prepare">, ConfigurationRejected | CapabilityUnsupported> => {
  const config = configuration(spec, admitted)
  return Result.flatMap(issue(Execution.validatePreparationConfiguration(spec.session_id, config)), () =>
    Result.flatMap(checkAgainstAdmitted(config, admitted), () =>
      encodes({
        type: "execution_prepare",
        id: requestId,
        payload: { session_id: spec.session_id, configuration: config }
      })
    ))
}

/**
 * The read-only preparation of an idle Files directory read: exactly the bound Environment and resource
 * identity. Fails definitely for an Environment without a binding.
 */
export const readOnlyPrepare = (
  requestId: Ids.PreparationRequestId,
  spec: ExecutionSpec,
  admitted: Admitted
): Result.Result<Messages.MessageOfType<"execution_prepare">, ConfigurationRejected | CapabilityUnsupported> => {
  const env = spec.environment
  if (env.type === "none" || env.binding === undefined) {
    return Result.fail(new ConfigurationRejected({ issue: "local_environment" }))
  }
  const config: PromptRequestPayload = {
    agent_kind: spec.agent_kind,
    conversation_id: "",
    run_id: "",
    local_environment: env.binding,
    workspace_read_only: true,
    agent_state_key: Execution.agentStateKeyFor(spec.session_id),
    release_on_completion: true,
    strict_resume: true
  }
  return Result.flatMap(issue(Execution.validateReadOnlyConfiguration(config)), () =>
    Result.flatMap(checkAgainstAdmitted(config, admitted), () =>
      encodes({ type: "execution_prepare", id: requestId, payload: { session_id: spec.session_id, configuration: config } })
    ))
}

/** The direct `prompt_request` (Envelope.id and payload run id both name the Run), with its ordered input. */
export const promptRequest = (
  runId: Ids.RunId,
  spec: ExecutionSpec,
  admitted: Admitted,
  input: MessageInput.MessageInput
): Result.Result<Messages.MessageOfType<"prompt_request">, ConfigurationRejected | CapabilityUnsupported> => {
  const config = configuration(spec, admitted, { run_id: runId, input })
  return Result.flatMap(issue(inputIssue(input)), () =>
    Result.flatMap(issue(Execution.validateConfiguration(config)), () =>
      Result.flatMap(checkAgainstAdmitted(config, admitted), () =>
        encodes({ type: "prompt_request", id: runId, payload: config })
      )))
}

/** `execution_start` with the Executor and handle from `ready`, the new Run id and the ordered initial input. */
export const executionStart = (
  requestId: Ids.PreparationRequestId,
  ready: { readonly executor_id: Ids.ExecutorId; readonly handle: Ids.AdmissionHandle },
  runId: Ids.RunId,
  input: MessageInput.MessageInput
): Result.Result<Messages.MessageOfType<"execution_start">, ConfigurationRejected> =>
  Result.flatMap(issue(inputIssue(input)), () =>
    encodes({
      type: "execution_start",
      id: requestId,
      payload: { executor_id: ready.executor_id, handle: ready.handle, run_id: runId, input }
    }))

/** `execution_release` of an admission Core abandons before start. */
export const executionRelease = (
  requestId: Ids.PreparationRequestId,
  handle: Ids.AdmissionHandle
): Result.Result<Messages.MessageOfType<"execution_release">, ConfigurationRejected> =>
  encodes({ type: "execution_release", id: requestId, payload: { handle } })

/** `prompt_steer` for one active input, always with `durable_receipt: true`. */
export const promptSteer = (
  runId: Ids.RunId,
  inputId: Ids.InputId,
  input: MessageInput.MessageInput
): Result.Result<Messages.MessageOfType<"prompt_steer">, ConfigurationRejected> =>
  Result.flatMap(issue(inputIssue(input)), () =>
    encodes({ type: "prompt_steer", id: runId, payload: { input_id: inputId, input, durable_receipt: true } }))

/** `prompt_cancel`: with a delivery id the Runtime answers with a receipt; without one it is a best-effort abort. */
export const promptCancel = (
  runId: Ids.RunId,
  deliveryId?: Ids.DeliveryId
): Result.Result<Messages.MessageOfType<"prompt_cancel">, ConfigurationRejected> =>
  encodes({ type: "prompt_cancel", id: runId, payload: deliveryId === undefined ? {} : { delivery_id: deliveryId } })

/** Request facts of an initial input (images need `message_images`). */
export const requestFactsFor = (input: MessageInput.MessageInput | undefined): RequestFacts => ({
  message_images: input !== undefined && MessageInput.hasImages(input),
  function_result_images: false
})
