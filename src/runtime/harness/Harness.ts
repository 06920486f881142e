/**
 * The Harness adapter contract (reference harnesses.md §1.3; protocol "Capability declarations"): what a
 * Harness kind must provide for the Runtime to own its Executors and Turns.
 *
 * - A declaration: kind, availability, version and the complete capability record. It is data: having a
 *   method never grants support.
 * - An Executor factory: prepares a Session-owned Executor from the frozen configuration. It never receives
 *   model input or a Run id.
 * - An Executor: starts Turns and closes (close confirms every native process and stream stopped).
 * - A Turn: cancel, continuity snapshot, active input with a two-phase receipt, function results,
 *   interaction decisions, and settlement.
 *
 * Errors say what is known: `…Rejected` and `OperationUnsupported` are definite and happened before any
 * native effect; `NativeFailed` is a definite native failure; `NativeUnknown` means the call was dispatched
 * and its effect is unknown (never replayed); `ContractViolation` is raised by the Runtime when an operation
 * the admitted declaration supports answers "unsupported" (a bug in the adapter, distinct from all of the
 * above). Each admitted Executor and Turn keeps the declaration snapshot it was admitted with; the guarded
 * helpers at the bottom check that snapshot before any native call.
 */
import type { McpBinding } from "./McpBindings.js"
import { Context, Data, Effect, Layer, Option, type Scope } from "effect"
import type { Ownership } from "../Ownership.js"
import type { RuntimePolicy } from "../RuntimePolicy.js"
import type { AgentKindCapabilities, CapabilityName } from "../../proto/Capabilities.js"
import type { PromptRequestPayload } from "../../proto/Execution.js"
import type { FunctionCallPayload } from "../../proto/Functions.js"
import type { CallId, ExecutorId, InputId, InteractionId, RunId, SessionId } from "../../proto/Ids.js"
import type { PermissionRequestPayload, QuestionAnswer, UserChoicePayload } from "../../proto/Interaction.js"
import type { InputContent, MessageInput } from "../../proto/MessageInput.js"
import type { DonePayload, ErrorPayload, OutputMessagePayload, ToolCallPayload, Usage } from "../../proto/RunEvents.js"
import type {
  SubagentCoordinationPayload,
  SubagentIdentityPayload,
  SubagentItemPayload,
  SubagentLifecyclePayload,
  SubagentTurnPayload
} from "../../proto/Subagents.js"

// ---------------------------------------------------------------------------------------------- declaration

/** What one composed Runtime + Harness kind declares. The capability record is complete (30 explicit fields). */
export interface HarnessDeclaration {
  readonly kind: string
  readonly available: boolean
  readonly version?: string | undefined
  readonly unavailableReason?: string | undefined
  readonly capabilities: AgentKindCapabilities
}

// ---------------------------------------------------------------------------------------------- events

/**
 * What a Turn emits through its sink, in native order: Run events without the Run id and without `sequence`
 * (the Runtime numbers deltas from 1). The terminal outcome is not an event: it comes from `awaitSettlement`,
 * so the Runtime decides when `done` is published (after settlement, drained output and in-flight inputs).
 */
export type TurnEvent =
  | { readonly type: "delta"; readonly delta: string; readonly item_id?: string }
  | { readonly type: "thinking"; readonly text: string }
  | { readonly type: "output_message"; readonly payload: OutputMessagePayload }
  | { readonly type: "tool_call"; readonly payload: ToolCallPayload }
  | { readonly type: "usage"; readonly payload: Usage }
  | { readonly type: "error"; readonly payload: ErrorPayload }
  | { readonly type: "permission_request"; readonly payload: PermissionRequestPayload }
  /** Native withdrawal of a pending permission request. */
  | { readonly type: "permission_cancel"; readonly interactionId: InteractionId }
  | { readonly type: "prompt_for_user_choice"; readonly payload: UserChoicePayload }
  | { readonly type: "function_call"; readonly payload: FunctionCallPayload }
  /**
   * Sub-agent observations (only when the Run opted in with `observe_subagent_identities`; the Runtime drops them
   * otherwise). Identity first, then the child's lifecycle, Turns and items; coordination for each native
   * multi-agent call.
   */
  | { readonly type: "subagent_identity"; readonly payload: SubagentIdentityPayload }
  | { readonly type: "subagent_lifecycle"; readonly payload: SubagentLifecyclePayload }
  | { readonly type: "subagent_turn"; readonly payload: SubagentTurnPayload }
  | { readonly type: "subagent_item"; readonly payload: SubagentItemPayload }
  | { readonly type: "subagent_coordination"; readonly payload: SubagentCoordinationPayload }

/** The output of one Turn, owned by the Runtime. `emit` waits while the Run's bounded buffer is full. */
export interface TurnSink {
  readonly emit: (event: TurnEvent) => Effect.Effect<void>
  /**
   * `emit` without its Effect wrapper, for a harness emitting many events in a row on the Turn's fiber (the
   * scripted harness's deltas; issue 18): does `emit`'s synchronous part now and returns `undefined` when the event
   * is fully handled (queued, or dropped by the Run's opt-ins), otherwise the Effect that completes it (waiting for
   * room, reporting a refusal, registering a route), which must run before anything else is emitted. Optional: a
   * sink without it (a wrapper) is used through `emit`.
   */
  readonly emitUnsafe?: ((event: TurnEvent) => Effect.Effect<void> | undefined) | undefined
  /**
   * `emitUnsafe` of the `delta` event `{ delta: text, item_id: itemId }` without building the event (issue 18: the
   * scripted harness's per-delta path). Optional: without it, `emitUnsafe` (or `emit`) of the event.
   */
  readonly deltaUnsafe?: ((text: string, itemId: string | undefined) => Effect.Effect<void> | undefined) | undefined
}

// ---------------------------------------------------------------------------------------------- requests

/** What the factory receives: the frozen configuration, never model input or a Run id. */
export interface PrepareRequest {
  readonly executorId: ExecutorId
  /** Absent for an Executor created for a direct `prompt_request`. */
  readonly sessionId: SessionId | undefined
  readonly configuration: PromptRequestPayload
  /** The declaration snapshot the Executor is admitted with. */
  readonly declaration: HarnessDeclaration
  /**
   * The effective MCP bindings (McpBindings.ts), resolved by the Executor table: transient, bearer tokens
   * `Redacted`; never persisted or logged. Absent when the caller resolved none.
   */
  readonly mcpServers?: ReadonlyArray<McpBinding> | undefined
}

/** One active-input batch. */
export interface SteerInput {
  readonly inputId: InputId
  readonly input: MessageInput
  readonly durable: boolean
}

export interface PermissionDecision {
  readonly approved: boolean
  readonly message?: string | undefined
  readonly updatedInput?: { readonly [key: string]: unknown } | undefined
}

export interface UserChoiceAnswer {
  /** Explicitly identified answers; questions without an entry stay unanswered. */
  readonly questionAnswers: ReadonlyArray<QuestionAnswer>
  readonly cancelled: boolean
  readonly reason?: string | undefined
}

export interface FunctionResult {
  readonly callId: CallId
  readonly success: boolean
  readonly content: ReadonlyArray<InputContent>
}

/** How a Turn settled. */
export interface Settlement {
  /** `cancelled` only when a native cancellation stopped the Turn. */
  readonly outcome: "completed" | "cancelled"
  /**
   * `completed`: the final outcome (content, usage, native session). `cancelled`: the confirmed continuity
   * snapshot (partial content, usage, native session); missing evidence stays absent.
   */
  readonly done: DonePayload
  /**
   * Optional: the content as consecutive parts, for a harness that keeps a Turn's text in pieces. When present,
   * `done.content` is empty and the content is the parts' concatenation (`settledDone`): the Runtime writes the
   * `done` frame from the parts without making them one string (issue 18, relay).
   */
  readonly contentParts?: ReadonlyArray<string> | undefined
  /** True when the native owner can take the next Turn; false obliges the Runtime to close the Executor. */
  readonly reusable: boolean
  readonly reason?: string | undefined
}

/** A settlement's `done` payload with its whole content (the parts joined when it came as `contentParts`). */
export const settledDone = (settlement: Settlement): DonePayload =>
  settlement.contentParts === undefined
    ? settlement.done
    : { ...settlement.done, content: settlement.contentParts.join("") }

// ---------------------------------------------------------------------------------------------- errors

/** The adapter does not implement this operation; nothing native happened. */
export class OperationUnsupported extends Data.TaggedError("OperationUnsupported")<{ readonly operation: string }> {}

/**
 * An operation the admitted declaration supports answered "unsupported". Raised by the Runtime, never by an
 * adapter; distinct from unavailability, a failed native call or an uncertain write.
 */
export class ContractViolation extends Data.TaggedError("ContractViolation")<{ readonly operation: string }> {}

/** The admitted declaration does not support what the request needs; checked before any native call. */
export class CapabilityUnsupported extends Data.TaggedError("CapabilityUnsupported")<{
  readonly capability: CapabilityName
}> {}

/** The native side definitely refused; no effect took place. */
export class NativeRejected extends Data.TaggedError("NativeRejected")<{ readonly operation: string; readonly reason: string }> {}

/** The native call definitely failed (the operation did not take effect, or failed with a known category). */
export class NativeFailed extends Data.TaggedError("NativeFailed")<{ readonly operation: string; readonly reason: string }> {}

/** Dispatched without proof either way (timeout or loss after a possible native effect). Never replayed. */
export class NativeUnknown extends Data.TaggedError("NativeUnknown")<{ readonly operation: string; readonly reason: string }> {}

/** The native side does not know the interaction or call (unknown, resolved or withdrawn). */
export class NotPending extends Data.TaggedError("NotPending")<{ readonly operation: string }> {}

/** The native side is not ready yet (retryable). */
export class NotReady extends Data.TaggedError("NotReady")<{ readonly operation: string }> {}

/** A native resource whose cleanup the caller owns (returned by a factory that failed after creating it). */
export interface Residue {
  readonly close: Effect.Effect<void, CloseFailed>
}

/**
 * Preparation failed. When `residue` is present, something native was created and still needs cleanup.
 * `code: "history_unavailable"` says, from structural native evidence, that the native session to resume
 * does not exist (checked before any input).
 */
export class PrepareFailed extends Data.TaggedError("PrepareFailed")<{
  readonly reason: string
  readonly code?: "history_unavailable" | undefined
  readonly residue?: Residue | undefined
}> {}

/** No Turn was created and no input was submitted. */
export class StartFailed extends Data.TaggedError("StartFailed")<{ readonly reason: string }> {}

/** One close attempt failed; the resource stays owned and the close will be retried. */
export class CloseFailed extends Data.TaggedError("CloseFailed")<{ readonly reason: string }> {}

/** Settlement could not be confirmed: the Runtime keeps ownership and capacity and closes the Executor. */
export class SettlementUnconfirmed extends Data.TaggedError("SettlementUnconfirmed")<{ readonly reason: string }> {}

export type SteerError = OperationUnsupported | NativeRejected | NativeUnknown | NotReady
export type SubmitError = OperationUnsupported | NativeFailed | NotPending | NotReady

// ---------------------------------------------------------------------------------------------- contract

/** One Turn of an Executor. Every method targets this Turn only. */
export interface Turn {
  /** Asks the native side to stop this Turn; idempotent. Success proves the request was made, not settlement. */
  readonly cancel: Effect.Effect<void, OperationUnsupported | NativeRejected | NativeFailed>
  /** What was observed so far (native session, usage, partial text); readable at any time. */
  readonly cancellationOutcome: Effect.Effect<DonePayload>
  /**
   * Writes active input. Runs `written` exactly once when the complete native write finished, then waits for
   * the native application receipt; success proves native consumption. `NativeRejected` is definite,
   * `NativeUnknown` is unknown and never retried automatically.
   */
  readonly steerWithReceipt: (input: SteerInput, written: Effect.Effect<void>) => Effect.Effect<void, SteerError>
  /** Delivers a function result; success only after the native side confirmed it applied it. */
  readonly submitFunctionResult: (result: FunctionResult) => Effect.Effect<void, SubmitError>
  /** Applies a permission decision; success only after the native side accepted it. */
  readonly decidePermission: (id: InteractionId, decision: PermissionDecision) => Effect.Effect<void, SubmitError>
  /** Applies a user-choice answer (already validated against the emitted questions). */
  readonly answerUserChoice: (id: InteractionId, answer: UserChoiceAnswer) => Effect.Effect<void, SubmitError>
  /**
   * Waits until output is closed and native events, inputs, function calls and child work settled. An error
   * means settlement is unconfirmed: the Runtime keeps ownership and capacity.
   */
  readonly awaitSettlement: Effect.Effect<Settlement, SettlementUnconfirmed>
}

/** A Session-owned native resource, retained across settled Turns with identical configuration. */
export interface Executor {
  /**
   * Starts a Turn with fresh per-Turn state. `StartFailed` guarantees nothing was submitted. The sink belongs
   * to this Turn; every event the Turn emits goes through it.
   */
  readonly startTurn: (runId: RunId, input: MessageInput, sink: TurnSink) => Effect.Effect<Turn, StartFailed>
  /** The native session id observed so far (continuity; reuse checks). */
  readonly nativeSessionId: Effect.Effect<Option.Option<string>>
  /** Confirms every native process and stream stopped. A failure keeps ownership; the Runtime retries serially. */
  readonly close: Effect.Effect<void, CloseFailed>
}

/** One registered Harness kind. */
export interface Harness {
  readonly declaration: HarnessDeclaration
  /**
   * Prepares an Executor without model input. The Runtime runs it inside the Executor's own child scope (forked
   * from the connection scope) and closes that scope only after `Executor.close` was confirmed
   * (`closeUntilConfirmed`), or when preparation failed or was interrupted. Acquire native state here with
   * `Effect.acquireRelease` in that scope: the release is the last-resort kill or removal (it runs when
   * preparation is interrupted after a process spawned) and must be a no-op after a confirmed close. A release
   * that can fail (removing a directory) closes with `closeUntilConfirmed` under its own resource
   * (`OwnedDirectory.ts`): the Runtime provides an `Ownership` that also reports its failed attempts as the
   * Executor's unconfirmed cleanup, and its `RuntimePolicy`. Never a defect in a release.
   * `PrepareFailed.residue` is still honoured for compatibility; new adapters rely on the scope instead.
   */
  readonly prepare: (
    request: PrepareRequest
  ) => Effect.Effect<Executor, PrepareFailed, Scope.Scope | Ownership | RuntimePolicy>
}

/**
 * How a Harness kind is registered: runs once at daemon start. It performs discovery (an unusable binary yields
 * `available: false` with the complete capability record and an `unavailableReason`; discovery may only clear
 * capability fields, never set them) and acquires daemon-lifetime resources in the given scope (released at
 * daemon shutdown). `R` is a process service the kind needs (the scripted kind needs `ScriptedSignals`).
 */
export type HarnessConstructor<R = never> = Effect.Effect<Harness, never, Scope.Scope | R>

/**
 * One registry entry: the Harness a kind's Layer provides. The registry builds each entry's Layer once, at daemon
 * start, in its own layer scope (`HarnessRegistry.layerFrom`); what the Layer acquires (a process supervisor,
 * temporary directories, clients) is released when that scope closes at daemon shutdown, after every connection
 * confirmed its cleanup.
 */
export class HarnessEntry extends Context.Service<HarnessEntry, Harness>()("agentwire/runtime/HarnessEntry") {
  /** A kind's registry entry from its constructor (acquisitions scoped to the entry's Layer). */
  static readonly layer = <R>(construct: HarnessConstructor<R>): HarnessLayer<Exclude<R, Scope.Scope>> =>
    Layer.effect(HarnessEntry, construct)
  /** An entry for a Harness that acquires nothing (tests, embedders). */
  static readonly succeed = (harness: Harness): HarnessLayer => Layer.succeed(HarnessEntry, harness)
}

/** A registry entry as a Layer: it provides one Harness and may need the process services `R`. */
export type HarnessLayer<R = never> = Layer.Layer<HarnessEntry, never, R>

// ---------------------------------------------------------------------------------------------- guards

/** The first capability in `needed` that the snapshot does not support. */
export const missingCapability = (
  snapshot: HarnessDeclaration,
  needed: ReadonlyArray<CapabilityName>
): Option.Option<CapabilityName> => Option.fromNullishOr(needed.find((name) => !snapshot.capabilities[name]))

/**
 * Runs an optional operation after checking the admitted snapshot: fails with `CapabilityUnsupported` before
 * any native call when the snapshot lacks `capability`, and turns an adapter's `OperationUnsupported` for a
 * declared capability into `ContractViolation`.
 */
export const guarded = <A, E>(
  snapshot: HarnessDeclaration,
  capability: CapabilityName,
  operation: Effect.Effect<A, E | OperationUnsupported>
): Effect.Effect<A, Exclude<E, OperationUnsupported> | CapabilityUnsupported | ContractViolation> =>
  snapshot.capabilities[capability]
    ? operation.pipe(
      Effect.catchIf(
        (e): e is OperationUnsupported => e instanceof OperationUnsupported,
        (e) => Effect.fail(new ContractViolation({ operation: e.operation }))
      )
    ) as Effect.Effect<A, Exclude<E, OperationUnsupported> | ContractViolation>
    : Effect.fail(new CapabilityUnsupported({ capability }))
