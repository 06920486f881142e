/**
 * One Claude Code Turn (reference harnesses.md §3.4–§3.9): translates the native stream-json messages of this
 * Run into Turn events and owns the Run's ledgers — the uuids of every user message written for the Run
 * (initial and steered), pending permission and question requests, and tool results awaited by a decision.
 *
 * - Receipts: `written` once the stdin line is written; `accepted` when the uuid is consumed natively
 *   (`user_message_uuids` on a frame, or `command_lifecycle started/completed`). A uuid `cancelled` before
 *   consumption is a definite rejection.
 * - Settlement: only when every uuid of the Run is `completed` or `cancelled` (`command_lifecycle`), so `done`
 *   comes after every submitted input was consumed. `cancelled` when our interrupt stopped it.
 * - Usage: the sum of `model_usage_since_last_result` over this Run's results (all models, sub-agents included);
 *   no result, no usage. Never a process-cumulative counter.
 * - Errors: a `result` with `is_error` is an `error` event classified by ErrorTable, unless our own interrupt
 *   caused it (then it is the cancellation).
 * The Executor routes native messages only to its current Turn; a settled Turn is no longer current, so a late
 * event can never reach a successor.
 */
import { Deferred, Effect } from "effect"
import { type InteractionId, unsafeMake } from "../../../proto/Ids.js"
import type { DonePayload, Usage } from "../../../proto/RunEvents.js"
import {
  NativeFailed,
  NativeRejected,
  NativeUnknown,
  NotPending,
  type PermissionDecision,
  type Settlement,
  SettlementUnconfirmed,
  type SteerError,
  type SteerInput,
  type SubmitError,
  type Turn,
  type TurnSink,
  type UserChoiceAnswer
} from "../Harness.js"
import { errorPayload } from "./ErrorTable.js"
import type { FunctionCall } from "./FunctionServer.js"
import { type ContentBlock, controlSuccess, type Json, type NativeMessage, userMessageLine } from "./StreamJson.js"
import { makeInputLedger } from "./InputLedger.js"
import { makeMessageStream } from "./MessageStream.js"
import { askPayload, observation } from "./ToolTranslation.js"
import { addUsage, emptyUsage, type RunUsage, toUsage } from "./Usage.js"

/** What the Executor lends a Turn. */
export interface TurnHost {
  readonly write: (line: string) => Effect.Effect<void, NativeUnknown>
  /** Sends `interrupt {cancel_queued: true}`; succeeds once written; the receipt is handled by `onInterruptReceipt`. */
  readonly interrupt: Effect.Effect<void, NativeFailed>
  readonly uuid: Effect.Effect<string>
  readonly interactionId: (prefix: "perm" | "ask") => InteractionId
  readonly sessionId: () => string | undefined
  readonly observeMessages: boolean
  readonly observeTools: boolean
  /** Called once when the Turn settles; the Executor stops routing to it. */
  readonly ended: (reusable: boolean) => Effect.Effect<void>
}

interface PendingInteraction {
  readonly nativeRequestId: string
  readonly toolUseId: string | undefined
  readonly input: Json
  /** For AskUserQuestion: question id → native question text. */
  readonly questions?: ReadonlyMap<string, string>
}

export interface ClaudeCodeTurn {
  readonly turn: Turn
  readonly onMessage: (message: NativeMessage) => Effect.Effect<void>
  /** The process ended (or the Executor closed) under the Turn. */
  readonly onLost: (reason: string) => Effect.Effect<void>
  readonly onInterruptReceipt: (stillQueued: ReadonlyArray<string>) => Effect.Effect<void>
  /** A `tools/call` of a Core function (FunctionServer.ts): emitted as `function_call`, answered on its result. */
  readonly onFunctionCall: (call: FunctionCall) => Effect.Effect<void>
  /** Writes the Run's input; the Turn owns the outcome from here on. */
  readonly submit: (input: ReadonlyArray<{ readonly content: SteerInput["input"][number]["content"] }>) => Effect.Effect<void>
}

export const makeTurn = (host: TurnHost, sink: TurnSink) =>
  Effect.gen(function* () {
    const settled = yield* Deferred.make<Settlement, SettlementUnconfirmed>()
    const ledger = makeInputLedger()
    const stream = makeMessageStream(sink, host.observeMessages, () => state.assistantError !== undefined)
    const permissions = new Map<InteractionId, PendingInteraction>()
    const asks = new Map<InteractionId, PendingInteraction>()
    const toolNames = new Map<string, string>()
    const toolResults = new Map<string, Deferred.Deferred<void, NativeFailed>>()
    const calls = new Map<string, FunctionCall>()
    const state = {
      usage: emptyUsage as RunUsage,
      usageSeen: false,
      assistantError: undefined as string | undefined,
      cancelRequested: false,
      reusable: true,
      reason: undefined as string | undefined,
      ended: false
    }

    const snapshot = (): DonePayload => {
      const session = host.sessionId()
      return {
        content: stream.content(),
        ...(state.usageSeen ? { usage: toUsage(state.usage) } : {}),
        ...(session === undefined ? {} : { metadata: { agent_session_id: session, agent_session_type: "claude_code" } })
      }
    }

    const end = (outcome: "completed" | "cancelled" | "lost") =>
      Effect.gen(function* () {
        if (state.ended) return
        state.ended = true
        yield* ledger.rejectOpen
        const unapplied = new NativeFailed({ operation: "decision", reason: "the turn ended before the decision was applied" })
        for (const waiter of toolResults.values()) yield* Deferred.fail(waiter, unapplied)
        toolResults.clear()
        calls.clear()
        permissions.clear()
        asks.clear()
        const reusable = outcome !== "lost" && state.reusable
        yield* host.ended(reusable)
        if (outcome === "lost") {
          yield* Deferred.fail(settled, new SettlementUnconfirmed({ reason: state.reason ?? "the native process ended under the turn" }))
          return
        }
        yield* Deferred.succeed(settled, {
          outcome,
          done: snapshot(),
          reusable,
          ...(reusable || state.reason === undefined ? {} : { reason: state.reason })
        })
      })

    const checkSettled = Effect.suspend(() => {
      if (state.ended || !ledger.allFinished()) return Effect.void
      const cancelled = state.cancelRequested && ledger.anyCancelled()
      return end(cancelled ? "cancelled" : "completed")
    })

    const toolUse = (block: ContentBlock) =>
      Effect.suspend(() => {
        if (block.id === undefined || block.name === undefined) return Effect.void
        toolNames.set(block.id, block.name)
        return sink.emit({
          type: "tool_call",
          payload: {
            id: block.id,
            name: block.name,
            stage: "before",
            ...(block.input === undefined ? {} : { args: block.input }),
            ...(host.observeTools ? { observation: observation(block.name, block.input, "in_progress") } : {})
          }
        })
      })

    const toolResult = (block: ContentBlock) =>
      Effect.gen(function* () {
        const id = block.tool_use_id
        if (id === undefined) return
        const name = toolNames.get(id) ?? "unknown"
        const output = typeof block.content === "string" ? block.content : Array.isArray(block.content) ? block.content : null
        yield* sink.emit({
          type: "tool_call",
          payload: {
            id,
            name,
            stage: "after",
            result: { content: output as never, is_error: block.is_error === true },
            ...(host.observeTools
              ? { observation: { ...observation(name, undefined, block.is_error === true ? "failed" : "completed"), output: output as never } }
              : {})
          }
        })
        const waiter = toolResults.get(id)
        toolResults.delete(id)
        if (waiter !== undefined) yield* Deferred.succeed(waiter, undefined)
      })

    const onMessage = (message: NativeMessage): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (state.ended) return
        switch (message.type) {
          case "command_lifecycle": {
            yield* ledger.lifecycle(message.uuid, message.state)
            return yield* checkSettled
          }
          case "init":
          case "status":
            return yield* ledger.markConsumed(message.consumed)
          case "stream_event":
            yield* ledger.markConsumed(message.consumed)
            return yield* stream.onEvent(message.event)
          case "assistant": {
            yield* ledger.markConsumed(message.consumed)
            if (message.error !== undefined) state.assistantError = message.error
            if (message.aborted) stream.aborted(message.messageId)
            for (const block of message.content) if (block.type === "tool_use") yield* toolUse(block)
            return
          }
          case "user":
            for (const block of message.content) if (block.type === "tool_result") yield* toolResult(block)
            return
          case "can_use_tool": {
            const pending: PendingInteraction = { nativeRequestId: message.requestId, toolUseId: message.toolUseId, input: message.input }
            if (message.toolName === "AskUserQuestion") {
              const id = host.interactionId("ask")
              const { payload, questions } = askPayload(id, message.input, message.toolUseId)
              asks.set(id, { ...pending, questions: new Map(questions.map((q) => [q.id, q.question])) })
              return yield* sink.emit({ type: "prompt_for_user_choice", payload })
            }
            const id = host.interactionId("perm")
            permissions.set(id, pending)
            return yield* sink.emit({
              type: "permission_request",
              payload: {
                request_id: id,
                tool: message.toolName,
                title: `Claude Code wants to use ${message.toolName}`.slice(0, 256),
                ...(message.description === undefined ? {} : { detail: message.description.slice(0, 1024) }),
                payload: { input: message.input as never, ...(message.toolUseId === undefined ? {} : { tool_use_id: message.toolUseId }) }
              }
            })
          }
          case "control_cancel_request": {
            for (const table of [permissions, asks]) {
              for (const [id, pending] of table) {
                if (pending.nativeRequestId !== message.requestId) continue
                table.delete(id)
                yield* sink.emit({ type: "permission_cancel", interactionId: id })
              }
            }
            return
          }
          case "result": {
            yield* ledger.markConsumed(message.consumed)
            if (message.usageSinceLast !== undefined) {
              state.usage = addUsage(state.usage, message.usageSinceLast)
              state.usageSeen = true
              yield* sink.emit({ type: "usage", payload: toUsage(state.usage) satisfies Usage })
            }
            const ownInterrupt = state.cancelRequested && message.subtype === "error_during_execution"
            if (message.isError && !ownInterrupt) {
              yield* sink.emit({
                type: "error",
                payload: errorPayload({
                  terminalReason: message.terminalReason,
                  apiErrorStatus: message.apiErrorStatus,
                  apiErrorType: message.apiErrorType,
                  assistantError: state.assistantError
                }, message.subtype)
              })
            }
            state.assistantError = undefined
            return yield* checkSettled
          }
          default:
            return
        }
      })

    const submit = (input: ReadonlyArray<{ readonly content: SteerInput["input"][number]["content"] }>) =>
      Effect.gen(function* () {
        for (const message of input) {
          const uuid = yield* host.uuid
          ledger.add(uuid)
          const written = yield* Effect.exit(host.write(userMessageLine(uuid, message.content)))
          if (written._tag === "Failure") {
            state.reason = "stdin write failed"
            return yield* end("lost")
          }
        }
      })

    const steerWithReceipt = (input: SteerInput, written: Effect.Effect<void>): Effect.Effect<void, SteerError> =>
      Effect.gen(function* () {
        if (state.ended) return yield* new NativeRejected({ operation: "steer", reason: "no active turn" })
        if (!ledger.room(input.input.length)) {
          return yield* new NativeRejected({ operation: "steer", reason: "too many inputs for one turn" })
        }
        const waiters: Array<Deferred.Deferred<void, SteerError>> = []
        for (const message of input.input) {
          const uuid = yield* host.uuid
          const waiter = yield* Deferred.make<void, SteerError>()
          ledger.add(uuid, waiter)
          waiters.push(waiter)
          yield* host.write(userMessageLine(uuid, message.content))
        }
        yield* written
        for (const waiter of waiters) yield* Deferred.await(waiter)
      })

    /** Answers a can_use_tool request and waits until its tool result is observed. */
    const answer = (pending: PendingInteraction, response: Json, operation: string) =>
      Effect.gen(function* () {
        const applied = yield* Deferred.make<void, NativeFailed>()
        if (pending.toolUseId !== undefined) toolResults.set(pending.toolUseId, applied)
        yield* host.write(controlSuccess(pending.nativeRequestId, response)).pipe(
          Effect.mapError((e) => new NativeFailed({ operation, reason: e.reason }))
        )
        if (pending.toolUseId !== undefined) yield* Deferred.await(applied)
      })

    const decidePermission = (id: InteractionId, decision: PermissionDecision): Effect.Effect<void, SubmitError> =>
      Effect.gen(function* () {
        const pending = permissions.get(id)
        if (pending === undefined) return yield* new NotPending({ operation: "permission_decision" })
        permissions.delete(id)
        yield* answer(
          pending,
          decision.approved
            ? { behavior: "allow", updatedInput: (decision.updatedInput as Json | undefined) ?? pending.input }
            : { behavior: "deny", message: decision.message ?? "The user denied this tool use." },
          "permission_decision"
        )
      })

    const answerUserChoice = (id: InteractionId, choice: UserChoiceAnswer): Effect.Effect<void, SubmitError> =>
      Effect.gen(function* () {
        const pending = asks.get(id)
        if (pending === undefined) return yield* new NotPending({ operation: "prompt_for_user_choice_decision" })
        asks.delete(id)
        if (choice.cancelled) {
          return yield* answer(pending, { behavior: "deny", message: "The user declined to answer the questions." }, "prompt_for_user_choice_decision")
        }
        const answers: Record<string, string> = {}
        for (const a of choice.questionAnswers) {
          const text = pending.questions?.get(a.question_id)
          if (text !== undefined && a.answers.length > 0) answers[text] = a.answers.join(", ")
        }
        yield* answer(pending, { behavior: "allow", updatedInput: { ...pending.input, answers } }, "prompt_for_user_choice_decision")
      })

    const turn: Turn = {
      cancel: Effect.suspend(() => {
        if (state.ended || state.cancelRequested) return Effect.void
        state.cancelRequested = true
        return host.interrupt
      }),
      cancellationOutcome: Effect.sync(snapshot),
      steerWithReceipt,
      submitFunctionResult: (result) =>
        Effect.gen(function* () {
          const call = calls.get(result.callId)
          if (call === undefined || state.ended) return yield* new NotPending({ operation: "function_result" })
          // function_result_images is declared false: the Runtime refuses image results before this point.
          const content = result.content.flatMap((part) => (part.type === "input_text" ? [{ type: "text", text: part.text }] : []))
          if (content.length !== result.content.length) {
            return yield* new NativeFailed({ operation: "function_result", reason: "image results are not supported" })
          }
          calls.delete(result.callId)
          const applied = yield* Deferred.make<void, NativeFailed>()
          toolResults.set(call.toolUseId, applied)
          yield* call.respond({ content, isError: !result.success }).pipe(
            Effect.mapError((e) => new NativeFailed({ operation: "function_result", reason: e.reason }))
          )
          // The tool_result of that tool_use in the transcript is the native receipt.
          yield* Deferred.await(applied)
        }),
      decidePermission,
      answerUserChoice,
      awaitSettlement: Deferred.await(settled)
    }

    const result: ClaudeCodeTurn = {
      turn,
      onFunctionCall: (call) =>
        Effect.suspend(() => {
          if (state.ended) return Effect.void
          calls.set(call.toolUseId, call)
          return sink.emit({
            type: "function_call",
            payload: { call_id: unsafeMake.callId(call.toolUseId), name: call.name, arguments: call.arguments as never }
          })
        }),
      onMessage,
      onLost: (reason) =>
        Effect.suspend(() => {
          state.reason = reason
          return end("lost")
        }),
      onInterruptReceipt: (stillQueued) =>
        Effect.sync(() => {
          // Queued input that survives our interrupt would run later: the native owner is not reusable.
          if (stillQueued.some(ledger.has)) {
            state.reusable = false
            state.reason = "queued input survived the interrupt"
          }
        }),
      submit
    }
    return result
  })
