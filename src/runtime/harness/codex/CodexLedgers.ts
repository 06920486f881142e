/**
 * The interaction and function ledgers of one Codex Turn (reference harnesses.md §2.7–§2.9): Codex's server
 * requests for this turn become `permission_request` (command and file-change approvals),
 * `prompt_for_user_choice` (`item/tool/requestUserInput`) and `function_call` (`item/tool/call`); Core's answers
 * go back exactly once, and each succeeds only on the native receipt (`serverRequest/resolved` for that request,
 * or the `item/completed` of the dynamic tool call) within `AnswerBudget`. A request Codex resolves without our
 * answer, or one still pending when the turn ends, is withdrawn (`permission_cancel`).
 */
import { Deferred, Duration, Effect, Option } from "effect"
import type { InteractionId } from "../../../proto/Ids.js"
import { unsafeMake } from "../../../proto/Ids.js"
import {
  type FunctionResult,
  NativeFailed,
  NotPending,
  type PermissionDecision,
  type TurnEvent,
  type UserChoiceAnswer
} from "../Harness.js"
import * as P from "./CodexProtocol.js"
import type { RequestId, RpcClient } from "./CodexRpc.js"

/** Budget for the native side to resolve an answered server request (approval, function result). */
export const AnswerBudget = Duration.seconds(10)

export interface LedgerHost {
  readonly rpc: RpcClient
  readonly emit: (event: TurnEvent) => Effect.Effect<void>
  /** Does a thread / turn id pair belong to this Turn? */
  readonly ours: (threadId: string, turnId: string) => boolean
  readonly nextInteractionId: (prefix: "perm" | "ask") => InteractionId
}

export const makeLedgers = (host: LedgerHost) => {
  const permissions = new Map<string, RequestId>()
  const asks = new Map<string, RequestId>()
  const calls = new Map<string, RequestId>()
  const answered = new Map<string, Deferred.Deferred<void>>()

  /** Translates a server request of this turn; false when it is not ours. */
  const onServerRequest = (id: RequestId, method: string, params: unknown): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      if (method === "item/commandExecution/requestApproval" || method === "item/fileChange/requestApproval") {
        const p = P.decode(P.ApprovalRequest)(params)
        if (Option.isNone(p) || !host.ours(p.value.threadId, p.value.turnId)) return false
        const interaction = host.nextInteractionId("perm")
        permissions.set(interaction, id)
        const command = method === "item/commandExecution/requestApproval"
        const r = p.value
        yield* host.emit({
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
        if (Option.isNone(p) || !host.ours(p.value.threadId, p.value.turnId)) return false
        const ask = host.nextInteractionId("ask")
        asks.set(ask, id)
        yield* host.emit({
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
        if (Option.isNone(p) || !host.ours(p.value.threadId, p.value.turnId)) return false
        calls.set(p.value.callId, id)
        yield* host.emit({
          type: "function_call",
          payload: { call_id: unsafeMake.callId(p.value.callId), name: p.value.tool, arguments: p.value.arguments as never }
        })
        return true
      }
      return false
    })

  /** `serverRequest/resolved`: our answer's receipt, or (for a permission we did not answer) a withdrawal. */
  const onResolved = (requestId: RequestId) =>
    Effect.gen(function* () {
      for (const [id, rpcId] of permissions) {
        if (rpcId !== requestId) continue
        permissions.delete(id)
        yield* host.emit({ type: "permission_cancel", interactionId: unsafeMake.interactionId(id) })
      }
      const receipt = answered.get(String(requestId))
      if (receipt !== undefined) yield* Deferred.succeed(receipt, undefined)
    })

  /** The `item/completed` of a dynamic tool call: the native receipt of its result. */
  const onItemCompleted = (itemId: string) =>
    Effect.suspend(() => {
      const receipt = answered.get(itemId)
      return receipt === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(receipt, undefined))
    })

  /** The turn ended: a permission still pending can no longer be applied (Codex withdraws it natively). */
  const withdrawAll = Effect.gen(function* () {
    for (const id of permissions.keys()) yield* host.emit({ type: "permission_cancel", interactionId: unsafeMake.interactionId(id) })
    permissions.clear()
    asks.clear()
    calls.clear()
  })

  /** Answers a pending server request, then waits for the native receipt (`key` resolves it). */
  const answer = (operation: string, rpcId: RequestId, key: string, result: unknown) =>
    Effect.gen(function* () {
      const receipt = yield* Deferred.make<void>()
      answered.set(key, receipt)
      yield* host.rpc.respond(rpcId, result).pipe(
        Effect.mapError(() => new NativeFailed({ operation, reason: "the answer could not be written" }))
      )
      yield* Deferred.await(receipt).pipe(
        Effect.timeoutOrElse({
          duration: AnswerBudget,
          orElse: () => Effect.fail(new NativeFailed({ operation, reason: "no native receipt within the budget" }))
        }),
        Effect.ensuring(Effect.sync(() => answered.delete(key)))
      )
    })

  /** Takes a pending entry atomically: one decision per interaction. */
  const take = (table: Map<string, RequestId>, key: string, operation: string) =>
    Effect.suspend(() => {
      const rpcId = table.get(key)
      if (rpcId === undefined) return Effect.fail(new NotPending({ operation }))
      table.delete(key)
      return Effect.succeed(rpcId)
    })

  const decidePermission = (id: InteractionId, decision: PermissionDecision) =>
    Effect.flatMap(take(permissions, id, "permission_decision"), (rpcId) =>
      answer("permission_decision", rpcId, String(rpcId), { decision: decision.approved ? "accept" : "decline" }))

  const answerUserChoice = (id: InteractionId, choice: UserChoiceAnswer) =>
    Effect.flatMap(take(asks, id, "prompt_for_user_choice_decision"), (rpcId) => {
      const answers: Record<string, { answers: ReadonlyArray<string> }> = {}
      if (!choice.cancelled) for (const a of choice.questionAnswers) answers[a.question_id] = { answers: a.answers }
      return answer("prompt_for_user_choice_decision", rpcId, String(rpcId), { answers })
    })

  const submitFunctionResult = (result: FunctionResult): Effect.Effect<void, NotPending | NativeFailed> =>
    result.content.some((part) => part.type !== "input_text") && calls.has(result.callId)
      ? Effect.fail(new NativeFailed({ operation: "function_result", reason: "image results are not supported" }))
      : Effect.flatMap(take(calls, result.callId, "function_result"), (rpcId) => {
        const contentItems = result.content.map((part) => ({ type: "inputText", text: part.type === "input_text" ? part.text : "" }))
        // The item/completed of the dynamic tool call (same id as the call) is the native receipt.
        return answer("function_result", rpcId, result.callId, { contentItems, success: result.success })
      })

  return { onServerRequest, onResolved, onItemCompleted, withdrawAll, decidePermission, answerUserChoice, submitFunctionResult }
}
