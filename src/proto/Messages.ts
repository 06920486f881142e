/**
 * The message catalogue of both directions and step two of the two-step decode. Each message is a schema
 * `{type, id?, payload?, trace?}` whose `id` and `payload` are typed for its family; `CoreToRuntime` and
 * `RuntimeToCore` are unions keyed by `type`, so a handler table over them is checked exhaustively by the
 * compiler.
 *
 * Decoding is strict in both directions: unknown members are rejected at any depth of a payload (a 0.10.0
 * peer sends only declared members). Envelope members stay tolerant (Envelope.ts). A type that has no id
 * ignores a sent id; a type without payload ignores a sent payload; a missing payload of a type that has one
 * decodes as `{}` (Go's zero value), so its required members still fail.
 */
import { Result, Schema } from "effect"
import { HeartbeatPayload } from "./Capabilities.js"
import { fitsUtf8Bytes, utf8ByteLength } from "./Checks.js"
import { decodeEnvelope, InvalidFrame, isEchoableId, type RawEnvelope } from "./Envelope.js"
import { DeviceShutdownPayload, PromptCancelPayload, PromptRequestPayload } from "./Execution.js"
import { FunctionCallPayload, FunctionResultPayload } from "./Functions.js"
import * as Ids from "./Ids.js"
import {
  InteractionDecisionAckPayload,
  PermissionDecisionPayload,
  PermissionRequestPayload,
  UserChoiceDecisionPayload,
  UserChoicePayload
} from "./Interaction.js"
import { compileValidator, type Validator } from "./internal/fastValidator.js"
import { checkJsonValue } from "./JsonBounds.js"
import { MaxFrameBytes, MaxRequestPayloadBytes, MaxRuntimePrepareBeginBytes, MaxTransferFramePayloadBytes } from "./Limits.js"
import {
  ExecutionPreparePayload,
  ExecutionReleasePayload,
  ExecutionStartPayload,
  PreparationStatusPayload
} from "./Preparation.js"
import {
  DeltaPayload,
  DonePayload,
  ErrorPayloadFromWire,
  OutputMessagePayload,
  ThinkingPayload,
  ToolCallPayload,
  Usage
} from "./RunEvents.js"
import { RuntimePreparePayload, RuntimePrepareResultPayload } from "./RuntimePrepare.js"
import { PromptSteerAckPayload, PromptSteerPayload } from "./Steering.js"
import {
  SubagentCoordinationPayload,
  SubagentIdentityPayload,
  SubagentItemPayload,
  SubagentLifecyclePayload,
  SubagentTurnPayload
} from "./Subagents.js"
import { SuspensionReplyPayload, SuspensionRequestPayload } from "./Suspension.js"
import {
  WorkspaceExportPayload,
  WorkspaceExportResultPayload,
  WorkspaceReadPayload,
  WorkspaceReadResultPayload,
  WorkspaceWritePayload,
  WorkspaceWriteResultPayload
} from "./Workspace.js"

const Trace = Schema.optionalKey(Schema.String)

/** Whether a message carries an id / a payload, and how large its encoded request payload may be. */
interface Shape {
  readonly id: "required" | "optional" | "none"
  readonly payload: boolean
  readonly maxPayloadBytes?: number
}

const withId = <const T extends string, I extends Schema.Top, P extends Schema.Top>(type: T, id: I, payload: P) =>
  Schema.Struct({ type: Schema.Literal(type), id, payload, trace: Trace })
const withoutId = <const T extends string, P extends Schema.Top>(type: T, payload: P) =>
  Schema.Struct({ type: Schema.Literal(type), payload, trace: Trace })

// ---------------------------------------------------------------------------------------------- Core → Runtime

export const RuntimePrepare = withId("runtime_prepare", Ids.TransferId, RuntimePreparePayload)
export const ExecutionPrepare = withId("execution_prepare", Ids.PreparationRequestId, ExecutionPreparePayload)
export const ExecutionStart = withId("execution_start", Ids.PreparationRequestId, ExecutionStartPayload)
export const ExecutionRelease = withId("execution_release", Ids.PreparationRequestId, ExecutionReleasePayload)
/** The envelope id (the Run id) may be absent; then the payload's `run_id` names the Run (Execution.resolvePromptRunId). */
export const PromptRequest = withId("prompt_request", Schema.optionalKey(Ids.RunId), PromptRequestPayload)
export const PromptCancel = withId("prompt_cancel", Ids.RunId, PromptCancelPayload)
export const DeviceShutdown = withoutId("device_shutdown", DeviceShutdownPayload)
export const PermissionDecision = withId("permission_decision", Ids.InteractionId, PermissionDecisionPayload)
export const UserChoiceDecision = withId("prompt_for_user_choice_decision", Ids.InteractionId, UserChoiceDecisionPayload)
export const PromptSteer = withId("prompt_steer", Ids.RunId, PromptSteerPayload)
export const FunctionResult = withId("function_result", Ids.RunId, FunctionResultPayload)
export const WorkspaceRead = withId("workspace_read", Ids.OperationId, WorkspaceReadPayload)
export const WorkspaceWrite = withId("workspace_write", Ids.OperationId, WorkspaceWritePayload)
export const WorkspaceExport = withId("workspace_export", Ids.OperationId, WorkspaceExportPayload)
export const EnvironmentQuiesce = withId("environment_quiesce", Ids.OperationId, SuspensionRequestPayload)
export const EnvironmentResume = withId("environment_resume", Ids.OperationId, SuspensionRequestPayload)

// ---------------------------------------------------------------------------------------------- Runtime → Core

export const Heartbeat = withoutId("heartbeat", HeartbeatPayload)
export const RuntimePrepareResult = withId("runtime_prepare_result", Ids.TransferId, RuntimePrepareResultPayload)
export const PreparationStatus = withId("preparation_status", Ids.PreparationRequestId, PreparationStatusPayload)
export const Delta = withId("delta", Ids.RunId, DeltaPayload)
export const Thinking = withId("thinking", Ids.RunId, ThinkingPayload)
export const OutputMessage = withId("output_message", Ids.RunId, OutputMessagePayload)
export const ToolCall = withId("tool_call", Ids.RunId, ToolCallPayload)
export const UsageMessage = withId("usage", Ids.RunId, Usage)
export const ErrorMessage = withId("error", Ids.RunId, ErrorPayloadFromWire)
export const Done = withId("done", Ids.RunId, DonePayload)
export const PermissionRequest = withId("permission_request", Ids.RunId, PermissionRequestPayload)
/** Body-less: Envelope.id is the withdrawn interaction id. */
export const PermissionCancel = Schema.Struct({
  type: Schema.Literal("permission_cancel"),
  id: Ids.InteractionId,
  trace: Trace
})
export const UserChoice = withId("prompt_for_user_choice", Ids.RunId, UserChoicePayload)
export const InteractionDecisionAck = withId("interaction_decision_ack", Ids.AckSubjectId, InteractionDecisionAckPayload)
export const PromptSteerAck = withId("prompt_steer_ack", Ids.RunId, PromptSteerAckPayload)
export const FunctionCall = withId("function_call", Ids.RunId, FunctionCallPayload)
export const WorkspaceReadResult = withId("workspace_read_result", Ids.OperationId, WorkspaceReadResultPayload)
export const WorkspaceWriteResult = withId("workspace_write_result", Ids.OperationId, WorkspaceWriteResultPayload)
export const WorkspaceExportResult = withId("workspace_export_result", Ids.OperationId, WorkspaceExportResultPayload)
export const EnvironmentQuiesced = withId("environment_quiesced", Ids.OperationId, SuspensionReplyPayload)
export const EnvironmentResumed = withId("environment_resumed", Ids.OperationId, SuspensionReplyPayload)
export const SubagentIdentity = withId("subagent_identity", Ids.RunId, SubagentIdentityPayload)
export const SubagentLifecycle = withId("subagent_lifecycle", Ids.RunId, SubagentLifecyclePayload)
export const SubagentTurn = withId("subagent_turn", Ids.RunId, SubagentTurnPayload)
export const SubagentItem = withId("subagent_item", Ids.RunId, SubagentItemPayload)
export const SubagentCoordination = withId("subagent_coordination", Ids.RunId, SubagentCoordinationPayload)

// ---------------------------------------------------------------------------------------------- catalogue

interface Def<S extends Schema.Top> extends Shape {
  readonly schema: S
}
const def = <S extends Schema.Top>(schema: S, shape: Shape): Def<S> => ({ schema, ...shape })
const required = { id: "required", payload: true } as const

/** Every Core → Runtime message, keyed by its `type`. */
export const coreToRuntime = {
  runtime_prepare: def(RuntimePrepare, { ...required, maxPayloadBytes: MaxRuntimePrepareBeginBytes }),
  execution_prepare: def(ExecutionPrepare, required),
  execution_start: def(ExecutionStart, required),
  execution_release: def(ExecutionRelease, required),
  prompt_request: def(PromptRequest, { id: "optional", payload: true }),
  prompt_cancel: def(PromptCancel, required),
  device_shutdown: def(DeviceShutdown, { id: "none", payload: true }),
  permission_decision: def(PermissionDecision, required),
  prompt_for_user_choice_decision: def(UserChoiceDecision, required),
  prompt_steer: def(PromptSteer, required),
  function_result: def(FunctionResult, required),
  workspace_read: def(WorkspaceRead, { ...required, maxPayloadBytes: MaxRequestPayloadBytes }),
  workspace_write: def(WorkspaceWrite, { ...required, maxPayloadBytes: MaxTransferFramePayloadBytes }),
  workspace_export: def(WorkspaceExport, { ...required, maxPayloadBytes: MaxRequestPayloadBytes }),
  environment_quiesce: def(EnvironmentQuiesce, required),
  environment_resume: def(EnvironmentResume, required)
} as const

/** Every Runtime → Core message, keyed by its `type`. */
export const runtimeToCore = {
  heartbeat: def(Heartbeat, { id: "none", payload: true }),
  runtime_prepare_result: def(RuntimePrepareResult, required),
  preparation_status: def(PreparationStatus, required),
  delta: def(Delta, required),
  thinking: def(Thinking, required),
  output_message: def(OutputMessage, required),
  tool_call: def(ToolCall, required),
  usage: def(UsageMessage, required),
  error: def(ErrorMessage, required),
  done: def(Done, required),
  permission_request: def(PermissionRequest, required),
  permission_cancel: def(PermissionCancel, { id: "required", payload: false }),
  prompt_for_user_choice: def(UserChoice, required),
  interaction_decision_ack: def(InteractionDecisionAck, required),
  prompt_steer_ack: def(PromptSteerAck, required),
  function_call: def(FunctionCall, required),
  workspace_read_result: def(WorkspaceReadResult, required),
  workspace_write_result: def(WorkspaceWriteResult, { ...required, maxPayloadBytes: MaxTransferFramePayloadBytes }),
  workspace_export_result: def(WorkspaceExportResult, { ...required, maxPayloadBytes: MaxTransferFramePayloadBytes }),
  environment_quiesced: def(EnvironmentQuiesced, required),
  environment_resumed: def(EnvironmentResumed, required),
  subagent_identity: def(SubagentIdentity, required),
  subagent_lifecycle: def(SubagentLifecycle, required),
  subagent_turn: def(SubagentTurn, required),
  subagent_item: def(SubagentItem, required),
  subagent_coordination: def(SubagentCoordination, required)
} as const

type Catalogue = Record<string, Def<Schema.Top>>
type MessageOf<C extends Catalogue> = { [K in keyof C]: C[K]["schema"]["Type"] }[keyof C]

/** Every message Core sends to a Runtime. */
export type CoreToRuntime = MessageOf<typeof coreToRuntime>
/** Every message a Runtime sends to Core. */
export type RuntimeToCore = MessageOf<typeof runtimeToCore>
export type CoreToRuntimeType = CoreToRuntime["type"]
export type RuntimeToCoreType = RuntimeToCore["type"]
/** Any message of either direction. */
export type Message = CoreToRuntime | RuntimeToCore
/** The message of a given type. */
export type MessageOfType<T extends Message["type"]> = Extract<Message, { readonly type: T }>

// The catalogue key of every entry is its schema's literal type; the compiler checks it here.
type KeysMatch<C extends Catalogue> = { [K in keyof C]: C[K]["schema"]["Type"] extends { readonly type: K } ? true : never }
export const _catalogueKeysMatch: [KeysMatch<typeof coreToRuntime>, KeysMatch<typeof runtimeToCore>] = [
  Object.fromEntries(Object.keys(coreToRuntime).map((k) => [k, true])) as KeysMatch<typeof coreToRuntime>,
  Object.fromEntries(Object.keys(runtimeToCore).map((k) => [k, true])) as KeysMatch<typeof runtimeToCore>
]

/** Union schemas of each direction (round trips, arbitraries). */
export const CoreToRuntimeSchema = Schema.Union(Object.values(coreToRuntime).map((d) => d.schema)) as unknown as Schema.Codec<CoreToRuntime, unknown>
export const RuntimeToCoreSchema = Schema.Union(Object.values(runtimeToCore).map((d) => d.schema)) as unknown as Schema.Codec<RuntimeToCore, unknown>

// ---------------------------------------------------------------------------------------------- decode (step two)

const strict = { onExcessProperty: "error" } as const

interface Compiled extends Shape {
  /** Schema's strict decoder (also used to explain a failure the fast validator found). */
  readonly decode: (input: unknown) => Result.Result<unknown, Schema.SchemaError>
  readonly encode: (input: unknown) => Result.Result<unknown, Schema.SchemaError>
  /** In-place validator equivalent to the strict decode, when the schema has no transformation. */
  readonly validate: Validator | undefined
}
const compile = (catalogue: Catalogue): ReadonlyMap<string, Compiled> =>
  new Map(
    Object.entries(catalogue).map(([type, d]) => [
      type,
      {
        id: d.id,
        payload: d.payload,
        ...(d.maxPayloadBytes === undefined ? {} : { maxPayloadBytes: d.maxPayloadBytes }),
        decode: Schema.decodeUnknownResult(d.schema as Schema.Codec<unknown, unknown>, strict),
        encode: Schema.encodeUnknownResult(d.schema as Schema.Codec<unknown, unknown>, strict),
        validate: compileValidator(d.schema.ast)
      }
    ])
  )
const compiledCoreToRuntime = compile(coreToRuntime)
const compiledRuntimeToCore = compile(runtimeToCore)
const compiledAll = new Map([...compiledCoreToRuntime, ...compiledRuntimeToCore])

const decodeWith = (table: ReadonlyMap<string, Compiled>, raw: RawEnvelope): Result.Result<unknown, InvalidFrame> => {
  const spec = table.get(raw.type)
  if (spec === undefined) return Result.fail(new InvalidFrame({ code: "unknown_type", bytes: raw.bytes }))
  const type = raw.type
  const input: Record<string, unknown> = { type }
  if (spec.id !== "none") {
    if (raw.id === undefined || raw.id.trim() === "") {
      if (spec.id === "required") return Result.fail(new InvalidFrame({ code: "missing_id", type, bytes: raw.bytes }))
    } else if (!isEchoableId(raw.id)) {
      return Result.fail(new InvalidFrame({ code: "id_too_large", type, bytes: raw.bytes }))
    } else input["id"] = raw.id
  }
  const id = input["id"] as string | undefined
  const withCorrelation = () => (id === undefined ? { type, bytes: raw.bytes } : { type, id, bytes: raw.bytes })
  if (raw.violation !== undefined) return Result.fail(new InvalidFrame({ code: raw.violation, ...withCorrelation() }))
  if (spec.payload) {
    const payload = raw.payload ?? {}
    // The bound is on the payload as sent, which is part of the frame: a frame within the bound needs no
    // re-encoding (JSON.stringify of an 87 KiB chunk costs more than the rest of its decode).
    if (spec.maxPayloadBytes !== undefined && raw.bytes > spec.maxPayloadBytes &&
      !fitsUtf8Bytes(JSON.stringify(payload), spec.maxPayloadBytes)) {
      return Result.fail(new InvalidFrame({ code: "payload_too_large", ...withCorrelation() }))
    }
    input["payload"] = payload
  }
  if (raw.trace !== undefined) input["trace"] = raw.trace
  // Hot path: a valid frame is validated in place and returned as is (no rebuild).
  if (spec.validate !== undefined && spec.validate(input)) return Result.succeed(input)
  const decoded = spec.decode(input)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  // The id was checked for size above; a failure at ["id"] is its type's rule.
  const idIssue = id !== undefined && decoded.failure.issue._tag === "Pointer" && decoded.failure.issue.path[0] === "id"
  if (idIssue) return Result.fail(new InvalidFrame({ code: "invalid_id", ...withCorrelation() }))
  return Result.fail(new InvalidFrame({ code: "invalid_payload", ...withCorrelation(), ...resultIdentity(type, input["payload"]) }))
}

const hasOwn = Object.prototype.hasOwnProperty
const isCallId = Schema.is(Ids.CallId)
const isDeliveryId = Schema.is(Ids.DeliveryId)

/**
 * The call and delivery ids of a `function_result` whose payload failed, when both are own members holding valid
 * ids (not blank, at most 128 bytes): read from the parsed payload without decoding anything else, so a result
 * whose content cannot be decoded still gets its `invalid_result` answer. Anything else yields nothing.
 */
const resultIdentity = (type: string, payload: unknown): { readonly call_id?: string; readonly delivery_id?: string } => {
  if (type !== "function_result" || typeof payload !== "object" || payload === null || Array.isArray(payload)) return {}
  const call = hasOwn.call(payload, "call_id") ? (payload as Record<string, unknown>)["call_id"] : undefined
  const delivery = hasOwn.call(payload, "delivery_id") ? (payload as Record<string, unknown>)["delivery_id"] : undefined
  return isCallId(call) && isDeliveryId(delivery) ? { call_id: call, delivery_id: delivery } : {}
}

/** Step two for frames Core sent: decodes a step-one envelope into a `CoreToRuntime` message. */
export const decodeCoreToRuntimeEnvelope = (raw: RawEnvelope): Result.Result<CoreToRuntime, InvalidFrame> =>
  decodeWith(compiledCoreToRuntime, raw) as Result.Result<CoreToRuntime, InvalidFrame>

/** Step two for frames a Runtime sent. */
export const decodeRuntimeToCoreEnvelope = (raw: RawEnvelope): Result.Result<RuntimeToCore, InvalidFrame> =>
  decodeWith(compiledRuntimeToCore, raw) as Result.Result<RuntimeToCore, InvalidFrame>

/** Both steps for a frame received by the Runtime. */
export const decodeCoreToRuntime = (
  frame: string | Uint8Array,
  knownBytes?: number
): Result.Result<CoreToRuntime, InvalidFrame> => {
  const raw = decodeEnvelope(frame, knownBytes)
  return Result.isFailure(raw) ? Result.fail(raw.failure) : decodeCoreToRuntimeEnvelope(raw.success)
}

/** Both steps for a frame received by Core. */
export const decodeRuntimeToCore = (
  frame: string | Uint8Array,
  knownBytes?: number
): Result.Result<RuntimeToCore, InvalidFrame> => {
  const raw = decodeEnvelope(frame, knownBytes)
  return Result.isFailure(raw) ? Result.fail(raw.failure) : decodeRuntimeToCoreEnvelope(raw.success)
}

// ---------------------------------------------------------------------------------------------- encode

/** Our own message could not be sent: it is invalid for its schema or its frame exceeds 4 MiB. Nothing was sent. */
export class OutgoingFrameRejected extends Schema.TaggedError<OutgoingFrameRejected>()("OutgoingFrameRejected", {
  type: Schema.String,
  reason: Schema.Literals(["invalid_message", "frame_too_large"]),
  bytes: Schema.optionalKey(Schema.Int)
}) {
  override get message() {
    return `outgoing ${this.type} frame rejected (${this.reason})`
  }
}

/**
 * Encodes a message of either direction as one JSON text frame. Refuses a message beyond the structural bounds
 * (128 deep, 131,072 values: JsonBounds.ts) as `invalid_message`, then validates it against its schema (an
 * incomplete capability declaration, a missing required member or an out-of-set code fails), then refuses a
 * frame over 4 MiB. Success means the text is a valid frame; nothing is sent.
 */
export const encodeMessage = (message: Message): Result.Result<string, OutgoingFrameRejected> => {
  const spec = compiledAll.get(message.type)
  if (spec === undefined) return Result.fail(new OutgoingFrameRejected({ type: "unknown", reason: "invalid_message" }))
  // Never encode a message deeper or larger than a peer may send (JsonBounds.ts); this also keeps
  // JSON.stringify and Schema's encoder off unbounded recursion.
  if (checkJsonValue(message) !== undefined) {
    return Result.fail(new OutgoingFrameRejected({ type: message.type, reason: "invalid_message" }))
  }
  let wire: unknown = message
  if (spec.validate === undefined || !spec.validate(message)) {
    const encoded = spec.encode(message)
    if (Result.isFailure(encoded)) {
      return Result.fail(new OutgoingFrameRejected({ type: message.type, reason: "invalid_message" }))
    }
    wire = encoded.success
  }
  const text = JSON.stringify(wire)
  if (text.length > MaxFrameBytes / 3) {
    const bytes = utf8ByteLength(text)
    if (bytes > MaxFrameBytes) {
      return Result.fail(new OutgoingFrameRejected({ type: message.type, reason: "frame_too_large", bytes }))
    }
  }
  return Result.succeed(text)
}

/** True when `type` is defined for the given direction. */
export const isCoreToRuntimeType = (type: string): type is CoreToRuntimeType => compiledCoreToRuntime.has(type)
export const isRuntimeToCoreType = (type: string): type is RuntimeToCoreType => compiledRuntimeToCore.has(type)
