/**
 * One Codex Turn (reference harnesses.md §2.3–§2.10): translates the app-server's notifications for exactly
 * this thread and turn id into Turn events, answers its server requests through the interaction and function
 * ledgers, and implements steering (`turn/steer` with `expectedTurnId`), cancellation (`turn/interrupt`, settled
 * only by `turn/completed` `interrupted` for this turn id) and settlement.
 *
 * What each outcome proves: a steer's `written` runs when the line was flushed, success when the response names
 * the active turn; a JSON-RPC error is a definite rejection, no response within the budget is unknown. Usage
 * is rebased to this Run. Open messages stay open (no synthetic completion); open tool observations close as
 * `incomplete` when the turn ends. Errors are classified from `codexErrorInfo` only (CodexErrors.ts). With
 * `observe_subagent_identities`, sub-agent threads and multi-agent calls become `subagent_*` events
 * (CodexSubagents.ts); without it they are ignored like any other thread.
 */
import { Deferred, Duration, Effect, Option, type Scope } from "effect"
import type { PromptRequestPayload } from "../../../proto/Execution.js"
import type { InteractionId, RunId } from "../../../proto/Ids.js"
import type { DonePayload, ErrorPayload, Usage } from "../../../proto/RunEvents.js"
import {
  NativeFailed,
  NativeRejected,
  NativeUnknown,
  type Settlement,
  type SettlementUnconfirmed,
  type SteerError,
  type SteerInput,
  type Turn,
  type TurnSink
} from "../Harness.js"
import { classify, turnErrorPayload } from "./CodexErrors.js"
import { toolCall, toTokens, totalBefore, toUserInput } from "./CodexItems.js"
import * as P from "./CodexProtocol.js"
import { makeLedgers } from "./CodexLedgers.js"
import { makeSubagents } from "./CodexSubagents.js"
import type { Incoming, RpcClient } from "./CodexRpc.js"
import { makeWatchdog, type Watchdog } from "./CodexWatchdog.js"

/** Budget for a steer response (reference: native steering write bounded at 10 s). */
export const SteerBudget = Duration.seconds(10)

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
  /** How long Codex may keep reconnecting without progress before the Turn ends itself (CodexWatchdog.ts). */
  readonly reconnectBudget: Duration.Duration
  /** The Executor's scope (the reconnect deadline's fiber). */
  readonly scope: Scope.Scope
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

export const makeCodexTurn = (ctx: TurnContext): Effect.Effect<CodexTurn> =>
  Effect.gen(function* () {
    const observeMessages = ctx.config.observe_messages === true
    const observeTools = ctx.config.observe_tool_observations === true
    const observeSubagents = ctx.config.observe_subagent_identities === true
    const settled = yield* Deferred.make<Settlement, SettlementUnconfirmed>()
    let watchdog: Watchdog = { arm: Effect.void, reset: Effect.void, stop: Effect.void }
    const turnIdKnown = yield* Deferred.make<string>()
    const emit = ctx.sink.emit
    const state = {
      turnId: undefined as string | undefined,
      content: "",
      usage: undefined as Usage | undefined,
      baseline: ctx.baseline,
      cancelRequested: false,
      /** Set when the reconnect deadline passed: the interrupt is ours, the outcome an error. */
      unreachable: undefined as ErrorPayload | undefined,
      lastRetry: undefined as P.TurnError | undefined,
      ended: false,
      openTools: new Map<string, P.ToolItem>()
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
        yield* watchdog.stop
        for (const item of state.openTools.values()) {
          const after = toolCall(item, "after", observeTools)
          yield* emit({
            type: "tool_call",
            payload: after.observation === undefined ? after : { ...after, observation: { ...after.observation, status: "incomplete" } }
          })
        }
        state.openTools.clear()
        yield* ledgers.withdrawAll
        if (error !== undefined) yield* emit({ type: "error", payload: error })
        yield* Deferred.succeed(settled, { outcome, done: snapshot(), reusable, ...(reason === undefined ? {} : { reason }) })
      })

    /** Only `turn/started` and the `turn/start` response name the turn: a restored thread replays old turn ids. */
    const ours = (threadId: string, turnId: string) => threadId === ctx.threadId && state.turnId === turnId
    const ledgers = makeLedgers({ rpc: ctx.rpc, emit, ours, nextInteractionId: ctx.nextInteractionId })

    const subagents = observeSubagents
      ? makeSubagents({ threadId: ctx.threadId, turnId: () => state.turnId, emit, observeTools })
      : undefined

    const onNotification = (method: string, params: unknown): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        // Sub-agents first: their turns and items carry other thread ids, multi-agent calls are root items.
        if (subagents !== undefined && !state.ended && (yield* subagents.handle(method, params))) return true
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
              yield* ledgers.onItemCompleted(tool.value.id)
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
            if (state.baseline === undefined && Option.isSome(lastDecoded)) state.baseline = totalBefore(total, lastDecoded.value)
            ctx.onTotal(total)
            if (state.baseline === undefined) return true
            state.usage = toTokens(total, state.baseline)
            yield* emit({ type: "usage", payload: state.usage })
            return true
          }
          case "serverRequest/resolved": {
            const p = P.decode(P.ServerRequestResolved)(params)
            if (Option.isNone(p) || p.value.threadId !== ctx.threadId) return false
            yield* ledgers.onResolved(p.value.requestId)
            return true
          }
          case "error": {
            // Terminal errors arrive with turn/completed; a retried one is progress, unless it never stops.
            const p = P.decode(P.ErrorNotification)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turnId)) return false
            if (p.value.willRetry) {
              state.lastRetry = p.value.error
              yield* watchdog.arm
            }
            return true
          }
          case "turn/completed": {
            const p = P.decode(P.TurnCompleted)(params)
            if (Option.isNone(p) || !ours(p.value.threadId, p.value.turn.id)) return false
            const turn = p.value.turn
            if (turn.status === "interrupted" && state.unreachable !== undefined) yield* finish("completed", state.unreachable, true)
            else if (turn.status === "interrupted" && state.cancelRequested) yield* finish("cancelled", undefined, true)
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

    const handle = (message: Incoming) =>
      Effect.tap(
        message._tag === "Notification"
          ? onNotification(message.method, message.params)
          : ledgers.onServerRequest(message.id, message.method, message.params),
        // Anything of ours but a retried error is native progress.
        (ours) => (ours && !(message._tag === "Notification" && message.method === "error") ? watchdog.reset : Effect.void)
      )

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

    /** The reconnect deadline passed: interrupt the turn; its `interrupted` completion settles it with the error. */
    const unreachable = Effect.gen(function* () {
      const turnId = state.turnId
      if (state.ended || state.cancelRequested || turnId === undefined) return
      const info = classify(state.lastRetry?.codexErrorInfo)
      state.unreachable = {
        error: `codex could not reach the model endpoint within ${Duration.format(ctx.reconnectBudget)} (it kept reconnecting)`,
        ...(info.code === undefined ? { code: "request_timeout" } : info)
      }
      const interrupted = yield* ctx.rpc.call("turn/interrupt", { threadId: ctx.threadId, turnId }, P.AnyResult, { timeout: SteerBudget }).pipe(
        Effect.andThen(Deferred.await(settled).pipe(Effect.timeoutOption(SteerBudget))),
        Effect.map(Option.isSome),
        Effect.orElseSucceed(() => false)
      )
      // No settlement after the interrupt: the Turn ends anyway; the app-server is not trusted with another.
      if (!interrupted) yield* finish("completed", state.unreachable, false, "codex did not stop after the reconnect deadline")
    })
    watchdog = makeWatchdog(ctx.reconnectBudget, unreachable, ctx.scope)

    const turn: Turn = {
      cancel,
      cancellationOutcome: Effect.sync(snapshot),
      steerWithReceipt,
      submitFunctionResult: ledgers.submitFunctionResult,
      decidePermission: ledgers.decidePermission,
      answerUserChoice: ledgers.answerUserChoice,
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
