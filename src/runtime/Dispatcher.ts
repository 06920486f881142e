/**
 * Routes every Core → Runtime frame of one connection (protocol "Message families"). The handler table is
 * a mapped type over `Messages.CoreToRuntime["type"]`: a new message type fails to compile until it is
 * handled. The receive loop decodes nothing itself (the transport did) and never waits on preparation,
 * start, native writes, sends or cleanup: handlers only update connection state and fork.
 *
 * Malformed frames (`Inbound.Invalid`, see transport/Transport.ts): when the frame's type and a bounded id
 * are known, the family's documented reply is sent —
 *
 * | type                                         | reply                                                       |
 * |----------------------------------------------|-------------------------------------------------------------|
 * | execution_prepare / _start / _release        | `preparation_status` rejected, revision 0, `operation` +     |
 * |                                              | `invalid_request` / `invalid_start` / `invalid_release`      |
 * | prompt_steer                                 | `prompt_steer_ack` `invalid_input` with an empty input id     |
 * | prompt_request                               | `error` then `done` on the Run id, unless that Run is active |
 * | runtime_prepare                              | `runtime_prepare_result` rejected `invalid_request`          |
 * | workspace_read / workspace_write             | `…_result` rejected `invalid_request`                         |
 * | function_result (call and delivery ids read) | `interaction_decision_ack` `invalid_result` under the Run id  |
 * | prompt_cancel, permission_decision,          | none (no delivery id is known: an ack could establish        |
 * | prompt_for_user_choice_decision,             | nothing), one log line                                       |
 * | function_result otherwise, device_shutdown,  |                                                              |
 * | workspace_export                             |                                                              |
 * | environment_quiesce / environment_resume     | `environment_quiesced` / `_resumed` `accepted: false`,       |
 * |                                              | `invalid_request`, empty identities (never the payload)      |
 *
 * — otherwise the frame is dropped with one log line (code, type, id, bytes; never the payload). The
 * connection stays open.
 *
 * Trace: each handler runs in a span whose parent is Core's span when the envelope's `trace` is a valid W3C
 * traceparent, and in a local span otherwise; replies echo only a valid traceparent (`Outbound.withTrace`). A
 * trace never changes ownership and is never used as an id.
 *
 * `workspace_read`, `workspace_write` and `workspace_export` go to the connection's `Workspace` service
 * (workspace/Reads.ts, Writes.ts, Exports.ts).
 *
 * `runtime_prepare` goes to the connection's `Transfer` service (transfer/Transfer.ts).
 *
 * Suspension (Suspension.ts) sees every item first: while the connection is fenced (a quiesce was accepted,
 * or it started suspended and the resume has not arrived) nothing is routed.
 */
import { Context, Deferred, Effect, FiberSet, Layer } from "effect"
import type { InvalidFrame } from "../proto/Envelope.js"
import { StatusSendBudget } from "../proto/Limits.js"
import type { Messages } from "../proto/index.js"
import type { PreparationRequestId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import { withReceivedTrace } from "../proto/Trace.js"
import { Admission } from "./Admission.js"
import { Cancellation } from "./Cancellation.js"
import { Background, Drain } from "./ConnectionServices.js"
import { DirectRuns } from "./DirectRuns.js"
import { Executors } from "./Executors.js"
import { Functions } from "./Functions.js"
import { Interactions } from "./Interactions.js"
import { Outbound } from "./Outbound.js"
import { Runs } from "./Runs.js"
import { Steering } from "./Steering.js"
import { Suspension } from "./Suspension.js"
import type { Inbound } from "./transport/Transport.js"
import { Transfer } from "./transfer/Transfer.js"
import { Workspace } from "./workspace/Workspace.js"

type MessageOf<K extends Messages.CoreToRuntimeType> = Extract<Messages.CoreToRuntime, { readonly type: K }>

/** The span name of each request handler. */
const spanNames: { readonly [K in Messages.CoreToRuntimeType]: string } = {
  execution_prepare: "Runtime.execution_prepare",
  execution_start: "Runtime.execution_start",
  execution_release: "Runtime.execution_release",
  prompt_request: "Runtime.prompt_request",
  prompt_cancel: "Runtime.prompt_cancel",
  device_shutdown: "Runtime.device_shutdown",
  permission_decision: "Runtime.permission_decision",
  prompt_for_user_choice_decision: "Runtime.prompt_for_user_choice_decision",
  prompt_steer: "Runtime.prompt_steer",
  function_result: "Runtime.function_result",
  runtime_prepare: "Runtime.runtime_prepare",
  workspace_read: "Runtime.workspace_read",
  workspace_write: "Runtime.workspace_write",
  workspace_export: "Runtime.workspace_export",
  environment_quiesce: "Runtime.environment_quiesce",
  environment_resume: "Runtime.environment_resume"
}

/** One handler per Core → Runtime type; each returns without waiting on native work. */
export type Handlers = { readonly [K in Messages.CoreToRuntimeType]: (message: MessageOf<K>) => Effect.Effect<void> }

export interface DispatcherShape {
  /** Routes one inbound item. Returns as soon as the work is handed to connection-owned fibers. */
  readonly dispatch: (item: Inbound) => Effect.Effect<void>
  readonly handlers: Handlers
}

/** Options of the per-request span (see `route`). */
const routeSpan = { captureStackTrace: false } as const

const makeDispatcher = Effect.gen(function* () {
  const outbound = yield* Outbound
  const admission = yield* Admission
  const runs = yield* Runs
  const cancellation = yield* Cancellation
  const direct = yield* DirectRuns
  const steering = yield* Steering
  const interactions = yield* Interactions
  const functions = yield* Functions
  const executors = yield* Executors
  const background = yield* Background
  const drain = yield* Drain
  const workspace = yield* Workspace
  const transfer = yield* Transfer
  const suspension = yield* Suspension

  /** device_shutdown: stop Runs locally, stop preparations, close every Executor until confirmed. No reply. */
  const shutdown = (reason: string | undefined) =>
    Effect.gen(function* () {
      if (!(yield* drain.begin)) return
      yield* Effect.logInfo("device_shutdown: draining").pipe(Effect.annotateLogs({ reason_bytes: reason?.length ?? 0 }))
      yield* FiberSet.run(
        background,
        Effect.gen(function* () {
          yield* runs.stopAll
          yield* admission.shutdown
          yield* executors.closeAll
          yield* Deferred.succeed(drain.drained, undefined)
        })
      )
    })
  const reply = (message: Messages.RuntimeToCore) =>
    FiberSet.run(background, outbound.sendWithin(message, StatusSendBudget)).pipe(Effect.asVoid)

  const handlers: Handlers = {
    execution_prepare: (m) => admission.prepare(m.id, m.payload, m.trace),
    execution_start: (m) => admission.start(m.id, m.payload, m.trace),
    execution_release: (m) => admission.release(m.id, m.payload, m.trace),
    prompt_request: (m) => direct.request(m.id, m.payload, m.trace),
    prompt_cancel: (m) => cancellation.cancel(m.id, m.payload.delivery_id, m.trace),
    device_shutdown: (m) => shutdown(m.payload.reason),
    permission_decision: (m) => interactions.permissionDecision(m.id, m.payload, m.trace),
    prompt_for_user_choice_decision: (m) => interactions.userChoiceDecision(m.id, m.payload, m.trace),
    prompt_steer: (m) => steering.handle(m.id, m.payload, m.trace),
    function_result: (m) => functions.result(m.id, m.payload, m.trace),
    runtime_prepare: (m) => transfer.handle(m.id, m.payload, m.trace),
    workspace_read: (m) => workspace.read(m.id, m.payload, m.trace),
    workspace_write: (m) => workspace.write(m.id, m.payload, m.trace),
    workspace_export: (m) => workspace.export(m.id, m.payload, m.trace),
    environment_quiesce: suspension.quiesce,
    environment_resume: suspension.resume
  }

  /** The documented reply to a malformed frame of a known type and id; undefined when the rule is to drop. */
  const invalidReply = (error: InvalidFrame, type: string, id: string): Effect.Effect<void> | undefined => {
    switch (type) {
      case "function_result":
        return error.call_id === undefined || error.delivery_id === undefined
          ? undefined
          : functions.rejectInvalid(unsafeMake.runId(id), unsafeMake.deliveryId(error.delivery_id), unsafeMake.callId(error.call_id))
      case "execution_prepare":
      case "execution_start":
      case "execution_release":
        return admission.rejectInvalid(type, id as PreparationRequestId, undefined)
      case "prompt_steer":
        return steering.replyInvalid(unsafeMake.runId(id), undefined)
      case "prompt_request":
        return direct.rejectInvalid(unsafeMake.runId(id), undefined)
      case "runtime_prepare":
        return reply({
          type: "runtime_prepare_result",
          id: unsafeMake.transferId(id),
          payload: { outcome: "rejected", error_code: "invalid_request" }
        })
      case "workspace_read":
        return reply({ type: "workspace_read_result", id: unsafeMake.operationId(id), payload: { outcome: "rejected", error_code: "invalid_request" } })
      case "workspace_write":
        return reply({ type: "workspace_write_result", id: unsafeMake.operationId(id), payload: { outcome: "rejected", error_code: "invalid_request" } })
      case "environment_quiesce":
      case "environment_resume":
        return suspension.rejectInvalid(type, id)
      default:
        return undefined
    }
  }

  const invalid = (error: InvalidFrame) => {
    const action = error.type !== undefined && error.id !== undefined ? invalidReply(error, error.type, error.id) : undefined
    return Effect.andThen(
      Effect.logWarning(action === undefined ? "invalid frame dropped" : "invalid frame answered").pipe(
        Effect.annotateLogs({ code: error.code, type: error.type ?? "", id: error.id ?? "", bytes: error.bytes })
      ),
      action ?? Effect.void
    )
  }

  /**
   * Runs the handler in a span (`Runtime.<type>`) whose parent is Core's span when the frame's trace is a valid
   * traceparent, and a local span otherwise (protocol "Envelope and identity": missing or invalid trace data
   * creates a local trace). One span per received request, none per Run event; the trace never becomes an id.
   * The span captures no stack trace: it would always name this line (the handler is the span's name), and
   * capturing one costs an `Error` per received frame (every 64 KiB chunk of a write or transfer).
   */
  const route = <K extends Messages.CoreToRuntimeType>(message: MessageOf<K>): Effect.Effect<void> =>
    withReceivedTrace(
      (handlers[message.type as K] as (m: MessageOf<K>) => Effect.Effect<void>)(message),
      spanNames[message.type],
      message.trace,
      routeSpan
    )

  return Dispatcher.of({
    handlers,
    dispatch: (item) =>
      Effect.flatMap(suspension.admit(item), (admitted) =>
        !admitted
          ? Effect.void
          : item._tag === "Message"
          ? route(item.message)
          : Effect.withSpan(invalid(item.error), "Runtime.invalid_frame"))
  })
})

/** The receive side of one connection: every Core → Runtime frame goes through `dispatch`. */
export class Dispatcher extends Context.Service<Dispatcher, DispatcherShape>()("agentwire/runtime/Dispatcher") {
  static readonly layer = Layer.effect(Dispatcher, makeDispatcher)
}
