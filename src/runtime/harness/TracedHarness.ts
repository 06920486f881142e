/**
 * Spans around a Harness's native calls (docs/observability.md): every registered Harness is wrapped once by
 * the registry, so each `prepare`, `startTurn`, `steerWithReceipt`, `cancel`, `close` and interaction answer
 * runs in a `Harness.<operation>` span. Called from a request handler, the span is a child of that handler's
 * `Runtime.<type>` span, which continues Core's trace through the frame's `trace`.
 *
 * Attributes: the Harness kind, the operation, the wire message family that leads to it (`agentwire.wire.type`),
 * and the ids the Runtime already holds (Executor, Run, input, interaction, call). Never the configuration
 * (`agent_options`, model settings), the input or answer text, a credential or a token. The wrapper changes no
 * result, no error and no resource ownership.
 */
import { Effect } from "effect"
import type { Executor, Harness, Turn } from "./Harness.js"

type Attributes = Record<string, string | boolean>

const span = (kind: string, operation: string, wireType: string, attributes: Attributes = {}) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withSpan(self, `Harness.${operation}`, {
    // No call-site stack: it would name this wrapper, and capturing it built an Error for each wrapped operation of
    // every Turn, called or not (issue 18).
    captureStackTrace: false,
    attributes: {
      "agentwire.harness.kind": kind,
      "agentwire.harness.operation": operation,
      "agentwire.wire.type": wireType,
      ...attributes
    }
  })

const tracedTurn = (kind: string, ids: Attributes, turn: Turn): Turn => ({
  ...turn,
  cancel: turn.cancel.pipe(span(kind, "cancel", "prompt_cancel", ids)),
  steerWithReceipt: (input, written) =>
    turn.steerWithReceipt(input, written).pipe(
      span(kind, "steer", "prompt_steer", { ...ids, "agentwire.input_id": input.inputId, "agentwire.input.durable": input.durable })
    ),
  submitFunctionResult: (result) =>
    turn.submitFunctionResult(result).pipe(
      span(kind, "submit_function_result", "function_result", { ...ids, "agentwire.call_id": result.callId })
    ),
  decidePermission: (id, decision) =>
    turn.decidePermission(id, decision).pipe(
      span(kind, "decide_permission", "permission_decision", { ...ids, "agentwire.interaction_id": id })
    ),
  answerUserChoice: (id, answer) =>
    turn.answerUserChoice(id, answer).pipe(
      span(kind, "answer_user_choice", "prompt_for_user_choice_decision", { ...ids, "agentwire.interaction_id": id })
    )
})

const tracedExecutor = (kind: string, executorId: string, executor: Executor): Executor => ({
  ...executor,
  startTurn: (runId, input, sink) => {
    const ids = { "agentwire.executor_id": executorId, "agentwire.run_id": runId }
    return executor.startTurn(runId, input, sink).pipe(
      Effect.map((turn) => tracedTurn(kind, ids, turn)),
      span(kind, "start", "execution_start", ids)
    )
  },
  close: executor.close.pipe(span(kind, "close", "execution_release", { "agentwire.executor_id": executorId }))
})

/** The Harness with a span around each native call (same declaration, results, errors and scopes). */
export const traced = (harness: Harness): Harness => {
  const kind = harness.declaration.kind
  return {
    ...harness,
    prepare: (request) =>
      harness.prepare(request).pipe(
        Effect.map((executor) => tracedExecutor(kind, request.executorId, executor)),
        span(kind, "prepare", "execution_prepare", {
          "agentwire.executor_id": request.executorId,
          ...(request.sessionId === undefined ? {} : { "agentwire.session_id": request.sessionId })
        })
      )
  }
}
