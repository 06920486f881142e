/**
 * The state of one scripted Turn and its output helpers (deltas, output messages, tool calls, the continuity
 * snapshot). The per-delta path creates no generator.
 */
import type { McpBinding } from "../McpBindings.js"
import { type Deferred, Effect, type Scope } from "effect"
import type { PromptRequestPayload } from "../../../proto/Execution.js"
import type { ExecutorId, RunId } from "../../../proto/Ids.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import type { DonePayload, ToolCallPayload, ToolObservation, Usage } from "../../../proto/RunEvents.js"
import type { FunctionResult, PermissionDecision, SteerError, SteerInput, TurnSink, UserChoiceAnswer } from "../Harness.js"
import type { Step } from "./Script.js"
import type { ScriptedSignals } from "./ScriptedSignals.js"

/** Operations the scripted adapter can be told to answer "unsupported" although declared (a contract violation). */
export type ScriptedOperation = "steer" | "function_result" | "permission" | "user_choice"

/** What every Turn of one scripted harness shares. */
export interface ScriptedEnv {
  readonly signals: ScriptedSignals["Service"]
  readonly violations: ReadonlySet<ScriptedOperation>
  readonly nextId: (prefix: string) => string
  /** The bound workspace root (the Turn's working directory); absent: file steps fail. */
  readonly workspaceRoot?: string | undefined
  /** The Executor's effective MCP bindings (McpBindings.ts); the `mcp_servers` step shows them, bearer as presence. */
  readonly mcpServers?: ReadonlyArray<McpBinding> | undefined
}


export type AcceptMode = "ok" | "never" | "reject" | "unknown"

export interface BufferedInput {
  readonly input: SteerInput
  readonly result: Deferred.Deferred<void, SteerError>
}

export interface AwaitingSteer {
  remaining: number
  readonly write: "ok" | "hang" | "reject"
  readonly writeReturnsOn: string | undefined
  readonly accept: AcceptMode
  readonly done: Deferred.Deferred<void>
}

export interface PendingAsk {
  readonly questionIds: ReadonlyArray<string>
  readonly answer: Deferred.Deferred<UserChoiceAnswer>
}

export interface TurnState {
  /**
   * The Turn's latest content as its pieces in order, after `parts`: appending a delta's text allocates nothing of
   * its own, where `+=` built a rope node per delta that lived, and was copied by the collector, until the Turn ended
   * (issue 18, relay). Never more than `PiecesPerPart`: a full array is joined into one of `parts` and emptied,
   * keeping its room.
   */
  readonly content: Array<string>
  /**
   * The Turn's earlier content, each `PiecesPerPart` pieces joined as they fill (issue 18, relay: the pieces array
   * of a 10,000-delta Turn grew, was copied at each growth step and at settlement, and lived with every piece until
   * the Turn ended; about 26 bytes per delta allocated, the joins the same as at settlement).
   */
  readonly parts: Array<string>
  usage: Usage | undefined
  openMessage: { readonly id: string; text: string; readonly phase: string | undefined } | undefined
  cancel: { readonly _tag: "Normal" } | { readonly _tag: "Ignored" } | { readonly _tag: "SettlesOn"; readonly signal: string }
  cancelFails: boolean
  cancelRequested: boolean
  failSubmissions: number
  reusable: boolean
  ended: boolean
  awaiting: AwaitingSteer | undefined
  readonly buffer: Array<BufferedInput>
  readonly permissions: Map<string, Deferred.Deferred<PermissionDecision>>
  readonly asks: Map<string, PendingAsk>
  readonly calls: Map<string, Deferred.Deferred<FunctionResult>>
}


export interface TurnContext {
  readonly runId: RunId
  readonly input: MessageInput
  readonly sink: TurnSink
  readonly config: PromptRequestPayload
  readonly nativeSession: string
  readonly scope: Scope.Scope
  readonly executorId: ExecutorId
  readonly setCloseFails: (n: number) => void
  readonly setCloseHangs: (n: number) => void
  readonly release: () => void
}


/** Pieces of a Turn's content joined into one part of its settlement (`settled`). */
const PiecesPerPart = 1024

/** The Turn's output helpers over its state. */
export const makeOutput = (env: ScriptedEnv, ctx: TurnContext, state: TurnState) => {
  const { nextId } = env
  const observeMessages = ctx.config.observe_messages === true
  const observeTools = ctx.config.observe_tool_observations === true
  const emit = ctx.sink.emit

  /** Joins the pieces into one part and empties them (`pop` keeps the array's room; `length = 0` would not). */
  const fold = (): void => {
    const pieces = state.content
    state.parts.push(pieces.join(""))
    while (pieces.length > 0) pieces.pop()
  }

  /** The content so far as one string (kept as the only part, so a second snapshot does not join again). */
  const contentText = (): string => {
    if (state.parts.length === 0 && state.content.length <= 1) return state.content[0] ?? ""
    if (state.content.length > 0) fold()
    if (state.parts.length === 1) return state.parts[0]!
    const text = state.parts.join("")
    state.parts.length = 0
    state.parts.push(text)
    return text
  }

  const payload = (content: string): DonePayload => ({
    content,
    ...(state.usage === undefined ? {} : { usage: state.usage }),
    metadata: { agent_session_id: ctx.nativeSession, agent_session_type: "scripted" }
  })

  const snapshot = (): DonePayload => payload(contentText())

  /**
   * The settlement's `done` with its content as parts (`Settlement.contentParts`): the pieces joined per
   * `PiecesPerPart` (as they filled, `fold`), each part a short string of its own where one string of a long Turn's
   * text was a fresh large-object allocation (issue 18, relay: 430 KB per 10,000-delta Turn); a Turn of fewer
   * pieces gives its pieces. Kept as the Turn's parts.
   */
  const settled = (): { readonly done: DonePayload; readonly contentParts: ReadonlyArray<string> } => {
    if (state.parts.length === 0) return { done: payload(""), contentParts: state.content.slice() }
    if (state.content.length > 0) fold()
    return { done: payload(""), contentParts: state.parts.slice() }
  }

  /** One delta (opening an output message first when messages are observed). The per-delta path: no generator. */
  const delta = (text: string, phase?: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (observeMessages && state.openMessage === undefined) {
        const id = nextId("msg")
        state.openMessage = { id, text: "", phase }
        return Effect.andThen(
          emit({
            type: "output_message",
            payload: phase === undefined ? { id, status: "in_progress" } : { id, status: "in_progress", phase }
          }),
          emitDelta(text)
        )
      }
      return emitDelta(text)
    })
  const emitDelta = (text: string): Effect.Effect<void> => Effect.suspend(() => emitDeltaUnsafe(text) ?? Effect.void)
  const emitUnsafe = ctx.sink.emitUnsafe ?? emit
  const sinkDelta = ctx.sink.deltaUnsafe ??
    ((text: string, itemId: string | undefined) =>
      emitUnsafe(itemId === undefined ? { type: "delta", delta: text } : { type: "delta", delta: text, item_id: itemId }))
  const emitDeltaUnsafe = (text: string): Effect.Effect<void> | undefined => {
    const open = state.openMessage
    if (state.content.push(text) >= PiecesPerPart) fold()
    if (open === undefined) return sinkDelta(text, undefined)
    open.text += text
    return sinkDelta(text, open.id)
  }

  /**
   * `delta` run now, on the Turn's fiber (issue 18: a script's run of deltas costs no Effect per delta while the
   * Run's buffer has room): `undefined` when the delta was emitted, otherwise the Effect that completes it (an
   * output message to open first, a full buffer to wait for), to run before the next step.
   */
  const deltaUnsafe = (text: string, phase?: string): Effect.Effect<void> | undefined =>
    observeMessages && state.openMessage === undefined ? delta(text, phase) : emitDeltaUnsafe(text)

  const completeMessage = Effect.suspend(() => {
    const open = state.openMessage
    if (open === undefined) return Effect.void
    state.openMessage = undefined
    return emit({
      type: "output_message",
      payload: open.phase === undefined
        ? { id: open.id, status: "completed", text: open.text }
        : { id: open.id, status: "completed", phase: open.phase, text: open.text }
    })
  })

  const toolCall = (step: Extract<Step, { tool_call: unknown }>["tool_call"]) =>
    Effect.gen(function* () {
      const id = step.id ?? nextId("tool")
      const observation: ToolObservation | undefined = observeTools ? step.observation : undefined
      const base = (stage: "before" | "after", obs: ToolObservation | undefined): ToolCallPayload => ({
        id,
        name: step.name,
        stage,
        ...(step.args === undefined ? {} : { args: step.args }),
        ...(stage === "after" && step.result !== undefined ? { result: step.result } : {}),
        ...(obs === undefined ? {} : { observation: obs })
      })
      const stage = step.stage ?? "both"
      if (stage === "before" || stage === "both") {
        const before = observation === undefined || stage === "before"
          ? observation
          : { ...observation, status: "in_progress" as const }
        yield* emit({ type: "tool_call", payload: base("before", before) })
      }
      if (stage === "after" || stage === "both") yield* emit({ type: "tool_call", payload: base("after", observation) })
    })

  return { snapshot, settled, delta, deltaUnsafe, completeMessage, toolCall }
}
