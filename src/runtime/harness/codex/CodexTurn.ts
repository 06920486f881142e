/**
 * One Codex Turn (reference harnesses.md §2.3–§2.10): translates the app-server's notifications for exactly
 * this thread and turn id into Turn events, answers its server requests through the interaction and function
 * ledgers, and implements steering (`turn/steer` with `expectedTurnId`), cancellation (`turn/interrupt`, settled
 * only by `turn/completed` `interrupted` for this turn id) and settlement.
 *
 * What each outcome proves: a steer's `written` runs when the line was flushed, success when the response names
 * the active turn; a JSON-RPC error is a definite rejection, no response within the budget is unknown. Usage
 * is rebased to this Run. Open messages stay open (no synthetic completion); open tool observations close as
 * `incomplete` when the turn ends. Errors are classified from `codexErrorInfo` only (CodexErrors.ts).
 */
import { Deferred, Duration, Effect, Option } from "effect"
import type { PromptRequestPayload } from "../../../proto/Execution.js"
import { unsafeMake } from "../../../proto/Ids.js"
import type { InteractionId, RunId } from "../../../proto/Ids.js"
import type { DonePayload, ErrorPayload, Usage } from "../../../proto/RunEvents.js"
import {
  type FunctionResult,
  NativeFailed,
  NativeRejected,
  NativeUnknown,
  NotPending,
  type PermissionDecision,
  type Settlement,
  type SettlementUnconfirmed,
  type SteerError,
  type SteerInput,
  type Turn,
  type TurnSink,
  type UserChoiceAnswer
} from "../Harness.js"
import { turnErrorPayload } from "./CodexErrors.js"
import { toolCall, toTokens, toUserInput } from "./CodexItems.js"
import * as P from "./CodexProtocol.js"
import type { Incoming, RequestId, RpcClient } from "./CodexRpc.js"

/** Budget for a steer response (reference: native steering write bounded at 10 s). */
export const SteerBudget = Duration.seconds(10)
/** Budget for the native side to resolve an answered server request (approval, function result). */
export const AnswerBudget = Duration.seconds(10)

export interface TurnContext {
  readonly runId: RunId
  readonly rpc: RpcClient
  readonly threadId: string
  readonly config: PromptRequestPayload
  readonly sink: TurnSink
  /** Thread-cumulative total observed before this Turn, when known. */
  readonly baseline: P.TokenBreakdown | undefined
  /** Reports each thread-cumulative total (the Executor keeps the latest as the next baseline). */
  readonly onTotal: (total: P.TokenBreakdown) => void
  /** Mints interaction ids unique within the Executor. */
  readonly nextInteractionId: (prefix: "perm" | "ask") => InteractionId
}

/** What the Executor's dispatcher needs from the active Turn. */
export interface CodexTurn {
  readonly turn: Turn
  /** Handles one incoming message of this thread; false when it belongs to another turn. */
  readonly handle: (message: Incoming) => Effect.Effect<boolean>
  /** Records the turn id from the `turn/start` response. */
  readonly adoptTurnId: (id: string) => void
  readonly turnId: () => string | undefined
  /** The process ended under the Turn: settles it with an error (never as a cancellation). */
  readonly processLost: Effect.Effect<void>
  readonly settled: Deferred.Deferred<Settlement, SettlementUnconfirmed>
}

type PendingAnswer = { readonly rpcId: RequestId; readonly resolved: Deferred.Deferred<void> }

export const makeCodexTurn = (ctx: TurnContext): Effect.Effect<CodexTurn> =>
  Effect.gen(function* () {
    const observeMessages = ctx.config.observe_messages === true
    const observeTools = ctx.config.observe_tool_observations === true
    const settled = yield* Deferred.make<Settlement, SettlementUnconfirmed>()
    const turnIdKnown = yield* Deferred.make<string>()
    const emit = ctx.sink.emit
    const state = {
      turnId: undefined as string | undefined,
      content: "",
      usage: undefined as Usage | undefined,
      baseline: ctx.baseline,
      cancelRequested: false,
      ended: false,
      openTools: new Map<string, P.ToolItem>(),
      permissions: new Map<string, PendingAnswer>(),
      calls: new Map<string, PendingAnswer>(),
      asks: new Map<string, PendingAnswer>(),
      answered: new Map<string, Deferred.Deferred<void>>()
    }

    const adoptTurnId = (id: string) => {
      if (state.turnId !== undefined) return
      state.turnId = id
      Deferred.doneUnsafe(turnIdKnown, Effect.succeed(id))
    }

    const snapshot = (): DonePayload => ({
      content: state.content,
      ...(state.usage === undefined ? {} : { usage: state.usage }),
      metadata: { agent_session_id: ctx.threadId, agent_session_type: "codex_thread" }
    })

    const finish = (outcome: Settlement["outcome"], error: ErrorPayload | undefined, reusable: boolean, reason?: string) =>
      Effect.gen(function* () {
        if (state.ended) return
        state.ended = true
        for (const item of state.openTools.values()) {
          const after = toolCall(item, "after", observeTools)
          yield* emit({
            type: "tool_call",
            payload: after.observation === undefined ? after : { ...after, observation: { ...after.observation, status: "incomplete" } }
          })
        }
        state.openTools.clear()
        // The turn ended: a permission still pending can no longer be applied (Codex withdraws it natively).
        for (const id of state.permissions.keys()) {
          yield* emit({ type: "permission_cancel", interactionId: unsafeMake.interactionId(id) })
        }
        state.permissions.clear()
        state.asks.clear()
        state.calls.clear()
        if (error !== undefined) yield* emit({ type: "error", payload: error })
        yield* Deferred.succeed(settled, { outcome, done: snapshot(), reusable, ...(reason === undefined ? {} : { reason }) })
      })

    /** Only `turn/started` and the `turn/start` response name the turn: a restored thread replays old turn ids. */
    const ours = (threadId: string, turnId: string) => threadId === ctx.threadId && state.turnId === turnId

    const onNotification = (method: string, params: unknown): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        switch (method) {
          case "turn/started": {
            const p = P.decode(P.TurnCompleted)(params)
            if (Option.isNone(p) || p.value.threadId !== ctx.threadId || state.ended) return false
            adoptTurnId(p.value.turn.id)
            return state.turnId === p.value.turn.id
          }
          case "item/started":
          case "item/completed": {
            const p = P.decode(P.ItemEvent)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
            const started = method === "item/started"
            const raw = (params as { item: unknown }).item
            const message = P.decodeAgentMessage(raw)
            if (Option.isSome(message)) {
              if (!observeMessages) return true
              const m = message.value
              const phase = m.phase === undefined || m.phase === null ? {} : { phase: m.phase }
              yield* emit({
                type: "output_message",
                payload: started ? { id: m.id, status: "in_progress", ...phase } : { id: m.id, status: "completed", ...phase, text: m.text }
              })
              return true
            }
            const tool = P.decodeToolItem(raw)
            if (Option.isNone(tool)) return true
            if (started) state.openTools.set(tool.value.id, tool.value)
            else {
              if (!state.openTools.delete(tool.value.id)) yield* emit({ type: "tool_call", payload: toolCall(tool.value, "before", observeTools) })
              const answered = state.answered.get(tool.value.id)
              if (answered !== undefined) yield* Deferred.succeed(answered, undefined)
            }
            yield* emit({ type: "tool_call", payload: toolCall(tool.value, started ? "before" : "after", observeTools) })
            return true
          }
          case "item/agentMessage/delta": {
            const p = P.decode(P.TextDelta)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
            state.content += p.value.delta
            yield* emit(observeMessages ? { type: "delta", delta: p.value.delta, item_id: p.value.itemId } : { type: "delta", delta: p.value.delta })
            return true
          }
          case "item/reasoning/summaryTextDelta":
          case "item/reasoning/textDelta": {
            const p = P.decode(P.TextDelta)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
            yield* emit({ type: "thinking", text: p.value.delta })
            return true
          }
          case "thread/tokenUsage/updated": {
            const p = P.decode(P.TokenUsageUpdated)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
            const total = p.value.tokenUsage.total
            const last = (params as { tokenUsage: { last?: unknown } }).tokenUsage.last
            const lastDecoded = P.decode(P.TokenBreakdown)(last)
            // Unknown baseline (a resumed thread): the total before this turn's first request.
            if (state.baseline === undefined && Option.isSome(lastDecoded)) {
              const l = lastDecoded.value
              state.baseline = {
                totalTokens: total.totalTokens - l.totalTokens,
                inputTokens: total.inputTokens - l.inputTokens,
                cachedInputTokens: total.cachedInputTokens - l.cachedInputTokens,
                outputTokens: total.outputTokens - l.outputTokens,
                reasoningOutputTokens: total.reasoningOutputTokens - l.reasoningOutputTokens
              }
            }
            ctx.onTotal(total)
            if (state.baseline === undefined) return true
            state.usage = toTokens(total, state.baseline)
            yield* emit({ type: "usage", payload: state.usage })
            return true
          }
          case "serverRequest/resolved": {
            const p = P.decode(P.ServerRequestResolved)(params)
            if (Option.isNone(p) || p.value.threadId !== ctx.threadId) return false
            for (const [id, pending] of state.permissions) {
              if (pending.rpcId !== p.value.requestId) continue
              state.permissions.delete(id)
              // Resolved without our answer: a native withdrawal.
              yield* emit({ type: "permission_cancel", interactionId: unsafeMake.interactionId(id) })
            }
            const answered = state.answered.get(String(p.value.requestId))
            if (answered !== undefined) yield* Deferred.succeed(answered, undefined)
            return true
          }
          case "turn/completed": {
            const p = P.decode(P.TurnCompleted)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turn.id)) return false
            const turn = p.value.turn
            if (turn.status === "interrupted" && state.cancelRequested) yield* finish("cancelled", undefined, true)
            else if (turn.status === "failed") {
              yield* finish("completed", turnErrorPayload(turn.error ?? { message: "codex turn failed" }), true)
            } else if (turn.status === "interrupted") {
              yield* finish("completed", { error: "the codex turn was interrupted natively" }, true)
            } else yield* finish("completed", undefined, true)
            return true
          }
          default:
            return false
        }
      })

    const onServerRequest = (id: RequestId, method: string, params: unknown): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        if (method === "item/commandExecution/requestApproval" || method === "item/fileChange/requestApproval") {
          const p = P.decode(P.ApprovalRequest)(params)
          if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
          const interaction = ctx.nextInteractionId("perm")
          state.permissions.set(interaction, { rpcId: id, resolved: yield* Deferred.make<void>() })
          const command = method === "item/commandExecution/requestApproval"
          const r = p.value
          yield* emit({
            type: "permission_request",
            payload: {
              request_id: interaction,
              tool: command ? "command" : "file_change",
              title: command ? `Run ${r.command ?? "a command"}` : "Apply file changes",
              ...(r.reason === undefined || r.reason === null ? {} : { detail: r.reason }),
              payload: { item_id: r.itemId, ...(r.command ? { command: r.command } : {}), ...(r.cwd ? { cwd: r.cwd } : {}) }
            }
          })
          return true
        }
        if (method === "item/tool/requestUserInput") {
          const p = P.decode(P.UserInputRequest)(params)
          if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
          const ask = ctx.nextInteractionId("ask")
          state.asks.set(ask, { rpcId: id, resolved: yield* Deferred.make<void>() })
          yield* emit({
            type: "prompt_for_user_choice",
            payload: {
              ask_id: ask,
              tool_use_id: p.value.itemId,
              questions: p.value.questions.map((q) => ({
                id: q.id,
                header: q.header,
                question: q.question,
                is_other: q.isOther,
                is_secret: q.isSecret,
                options: (q.options ?? []).map((o) => ({ label: o.label, description: o.description }))
              }))
            }
          })
          return true
        }
        if (method === "item/tool/call") {
          const p = P.decode(P.ToolCallRequest)(params)
          if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
          state.calls.set(p.value.callId, { rpcId: id, resolved: yield* Deferred.make<void>() })
          yield* emit({
            type: "function_call",
            payload: { call_id: unsafeMake.callId(p.value.callId), name: p.value.tool, arguments: p.value.arguments as never }
          })
          return true
        }
        return false
      })

    const handle = (message: Incoming) =>
      message._tag === "Notification" ? onNotification(message.method, message.params) : onServerRequest(message.id, message.method, message.params)

    /** Answers a pending server request, then waits for the native receipt (`key` resolves it). */
    const answer = (operation: string, pending: PendingAnswer, key: string, result: unknown) =>
      Effect.gen(function* () {
        const receipt = yield* Deferred.make<void>()
        state.answered.set(key, receipt)
        yield* ctx.rpc.respond(pending.rpcId, result).pipe(
          Effect.mapError(() => new NativeFailed({ operation, reason: "the answer could not be written" }))
        )
        yield* Deferred.await(receipt).pipe(
          Effect.timeoutOrElse({
            duration: AnswerBudget,
            orElse: () => Effect.fail(new NativeFailed({ operation, reason: "no native receipt within the budget" }))
          }),
          Effect.ensuring(Effect.sync(() => state.answered.delete(key)))
        )
      })

    const decidePermission = (id: InteractionId, decision: PermissionDecision) =>
      Effect.suspend((): Effect.Effect<void, NotPending | NativeFailed> => {
        const pending = state.permissions.get(id)
        if (pending === undefined) return Effect.fail(new NotPending({ operation: "permission_decision" }))
        state.permissions.delete(id)
        return answer("permission_decision", pending, String(pending.rpcId), { decision: decision.approved ? "accept" : "decline" })
      })

    const answerUserChoice = (id: InteractionId, choice: UserChoiceAnswer) =>
      Effect.suspend((): Effect.Effect<void, NotPending | NativeFailed> => {
        const pending = state.asks.get(id)
        if (pending === undefined) return Effect.fail(new NotPending({ operation: "prompt_for_user_choice_decision" }))
        state.asks.delete(id)
        const answers: Record<string, { answers: ReadonlyArray<string> }> = {}
        if (!choice.cancelled) for (const a of choice.questionAnswers) answers[a.question_id] = { answers: a.answers }
        return answer("prompt_for_user_choice_decision", pending, String(pending.rpcId), { answers })
      })

    const submitFunctionResult = (result: FunctionResult) =>
      Effect.suspend((): Effect.Effect<void, NotPending | NativeFailed> => {
        const pending = state.calls.get(result.callId)
        if (pending === undefined) return Effect.fail(new NotPending({ operation: "function_result" }))
        if (result.content.some((part) => part.type !== "input_text")) {
          return Effect.fail(new NativeFailed({ operation: "function_result", reason: "image results are not supported" }))
        }
        state.calls.delete(result.callId)
        const contentItems = result.content.map((part) => ({ type: "inputText", text: part.type === "input_text" ? part.text : "" }))
        // The item/completed of the dynamic tool call (same id as the call) is the native receipt.
        return answer("function_result", pending, result.callId, { contentItems, success: result.success })
      })

    const steerWithReceipt = (input: SteerInput, written: Effect.Effect<void>): Effect.Effect<void, SteerError> =>
      Effect.gen(function* () {
        const turnId = state.turnId
        if (state.ended || turnId === undefined) return yield* new NativeRejected({ operation: "steer", reason: "no active turn" })
        const result = yield* ctx.rpc.call(
          "turn/steer",
          { threadId: ctx.threadId, expectedTurnId: turnId, input: toUserInput(input.input), clientUserMessageId: input.inputId },
          P.TurnSteerResult,
          { timeout: SteerBudget, written }
        ).pipe(
          Effect.catchTags({
            RpcNotSent: () => Effect.fail(new NativeRejected({ operation: "steer", reason: "the input could not be written" })),
            RpcRejected: (e) => Effect.fail(new NativeRejected({ operation: "steer", reason: e.message })),
            RpcUnknown: (e) => Effect.fail(new NativeUnknown({ operation: "steer", reason: e.reason }))
          })
        )
        if (result.turnId !== turnId) return yield* new NativeUnknown({ operation: "steer", reason: "applied to another turn" })
      })

    const cancel = Effect.gen(function* () {
      if (state.ended) return
      state.cancelRequested = true
      const turnId = yield* Deferred.await(turnIdKnown)
      yield* ctx.rpc.call("turn/interrupt", { threadId: ctx.threadId, turnId }, P.AnyResult, { timeout: SteerBudget }).pipe(
        Effect.catchTags({
          RpcNotSent: () => Effect.fail(new NativeFailed({ operation: "cancel", reason: "the interrupt could not be written" })),
          RpcRejected: (e) => (state.ended ? Effect.void : Effect.fail(new NativeRejected({ operation: "cancel", reason: e.message }))),
          // Dispatched: settlement (turn/completed interrupted) is the proof either way.
          RpcUnknown: () => Effect.void
        }),
        Effect.asVoid
      )
    })

    const turn: Turn = {
      cancel,
      cancellationOutcome: Effect.sync(snapshot),
      steerWithReceipt,
      submitFunctionResult,
      decidePermission,
      answerUserChoice,
      awaitSettlement: Deferred.await(settled)
    }
    return {
      turn,
      handle,
      adoptTurnId,
      turnId: () => state.turnId,
      processLost: finish("completed", { error: "the codex app-server exited during the turn" }, false, "app-server exited"),
      settled
    }
  })
