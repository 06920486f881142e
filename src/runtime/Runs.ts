/**
 * Runs of one connection (protocol "Preparation and execution order" step 4, "Active input receipts",
 * reference part 1 §7–§8): the Run table, each Run's bounded output buffer and its single forwarder, the
 * terminal `done`, and cancellation receipts.
 *
 * A Run fiber owns its Turn: it starts the forwarder before native start, numbers deltas from 1, applies the
 * Run's opt-ins, waits for native settlement, lets in-flight inputs settle (bounded), then publishes `done`
 * and hands the Executor back (retained idle, or closed). An execution error is followed by done.
 *
 * Cancellation (`prompt_cancel`): the native cancel is requested by a connection-owned fiber; a receipt
 * waiter answers `interaction_decision_ack` (Envelope.id = Run id) only after native settlement:
 * `applied: true` with the confirmed continuity snapshot in `outcome` (done then carries no content), or
 * `applied: false` with `run_inactive`, `cancel_timeout` (no settlement within 10 s; ownership is kept),
 * `cancel_failed` or `cancel_outcome_unavailable`. The receipt owns the terminal outcome.
 *
 * Never does: report a local interruption (disconnect, device_shutdown, process exit) as a cancellation,
 * fabricate `error`/`done` when observation is lost, or release an Executor whose Turn did not settle.
 */
import { type Cause, Data, Deferred, Effect, Fiber, FiberMap, FiberSet, Option, Queue, Result } from "effect"
import type { PromptRequestPayload } from "../proto/Execution.js"
import type { CallId, DeliveryId, RunId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import type { CancelErrorCode } from "../proto/ErrorCodes.js"
import { CancelSettlementBudget, ReceiptSendBudget, RunOutputBuffer } from "../proto/Limits.js"
import type { Messages } from "../proto/index.js"
import type { MessageInput } from "../proto/MessageInput.js"
import { type DonePayload, type ErrorPayload, normalizeEngineFailure } from "../proto/RunEvents.js"
import { echo } from "../proto/Trace.js"
import type { ExecutorEntry, Executors } from "./Executors.js"
import type { HarnessDeclaration, Settlement, Turn, TurnEvent, TurnSink } from "./harness/Harness.js"
import { SettlementUnconfirmed } from "./harness/Harness.js"
import { type Outbound, withTrace } from "./Outbound.js"
import type { TransportClosed } from "./transport/Transport.js"
import type { RunStatus } from "./StatusBoard.js"
import { makeRunInputs, type RunInputs } from "./Steering.js"

export type RunPhase = "starting" | "running" | "settling" | "finished"

/** The Run never got a Turn (its start failed or it was stopped before start). */
export class NoTurn extends Data.TaggedError("NoTurn")<{}> {}

/** One Run. Mutable fields change only in synchronous sections of this connection's fibers. */
export interface RunRecord {
  readonly runId: RunId
  readonly kind: string
  /** Started from an admission handle (execution_start) rather than a direct prompt_request. */
  readonly prepared: boolean
  /** For a prepared Run: the request id of the admission that started it (Core's Turn correlation). */
  readonly requestId: string | undefined
  /** The starting request's trace when it is a valid traceparent (`Trace.echo`), carried by every Run frame. */
  readonly trace: string | undefined
  /** The configuration whose opt-ins this Run follows. */
  readonly config: PromptRequestPayload
  /** The declaration snapshot this Run's Executor and Turn were admitted with. */
  readonly snapshot: HarnessDeclaration
  executor: ExecutorEntry | undefined
  phase: RunPhase
  turn: Turn | undefined
  readonly turnReady: Deferred.Deferred<Turn, NoTurn>
  readonly nativeSettled: Deferred.Deferred<Settlement, SettlementUnconfirmed | NoTurn>
  /** Completes once the Run's stream is closed (done sent, or no done when settlement is unconfirmed). */
  readonly finished: Deferred.Deferred<void>
  cancelRequested: boolean
  /** Cancellation receipts waiting for settlement (with a delivery id). */
  receiptWaiters: number
  /** Claimed at settlement: the receipts carry the continuity snapshot, done carries no content. */
  receiptsOwnOutcome: boolean
  readonly inputs: RunInputs
  /** Function calls emitted and not yet answered. */
  readonly pendingCalls: Set<CallId>
  deltaSequence: number
  thinkingSequence: number
}

/** Why a Run could not start. Nothing was submitted natively. */
export interface StartRefusal {
  readonly reason: string
  /** For a prepared start: the admission's rejection code. */
  readonly code: "executor_unavailable" | "executor_cleanup_unconfirmed" | "start_cancelled"
}

export interface RunSpec {
  readonly runId: RunId
  readonly kind: string
  readonly prepared: boolean
  readonly requestId?: string | undefined
  readonly trace: string | undefined
  readonly config: PromptRequestPayload
  readonly snapshot: HarnessDeclaration
  readonly input: MessageInput
  /** Provides the prepared Executor (already reserved) or prepares one; fails when nothing can run. */
  readonly acquire: Effect.Effect<ExecutorEntry, StartRefusal>
  /** A Turn exists (prepared: publish `started`). */
  readonly onStarted: Effect.Effect<void>
  /** No Turn will exist (prepared: publish the rejection). A direct Run reports error then done itself. */
  readonly onStartFailed: (refusal: StartRefusal) => Effect.Effect<void>
}

/** Hooks of the input, interaction and function families into a Run's life. */
export interface RunHooks {
  /**
   * Called for every interaction and function event (`permission_request`, `permission_cancel`,
   * `prompt_for_user_choice`, `function_call`) before it is queued, to register or drop its route. Output
   * events (delta, thinking, output_message, tool_call, usage, error) do not go through it.
   */
  readonly onEmit: (run: RunRecord, event: TurnEvent) => Effect.Effect<void>
  /** After native settlement, before done: let in-flight inputs settle (bounded). */
  readonly beforeDone: (run: RunRecord) => Effect.Effect<void>
  /** The Run is over (finished or interrupted): drop its routes. */
  readonly onEnd: (run: RunRecord) => Effect.Effect<void>
}

export interface Runs {
  /** Registers and forks a Run; `run_conflict` when the Run id is active on this connection. */
  readonly start: (spec: RunSpec) => Effect.Effect<Result.Result<RunRecord, "run_conflict">>
  readonly get: (runId: RunId) => Effect.Effect<Option.Option<RunRecord>>
  /** Handles prompt_cancel; never waits (the receipt waiter runs in a connection-owned fiber). */
  readonly cancel: (runId: RunId, deliveryId: DeliveryId | undefined, trace: string | undefined) => Effect.Effect<void>
  /** Stops every Run locally (device_shutdown): no receipt, no done; returns when each Run's cleanup ran. */
  readonly stopAll: Effect.Effect<void>
  readonly activeCount: Effect.Effect<number>
  readonly view: Effect.Effect<ReadonlyArray<typeof RunStatus.Type>>
}

export interface RunsDeps {
  readonly outbound: Outbound
  readonly executors: Executors
  readonly hooks: RunHooks
  /** Connection-owned fibers (receipt waiters, native cancel requests). */
  readonly background: FiberSet.FiberSet<unknown, unknown>
  /** Run after a Run is added, changes phase or is removed (the status board's `touch`). */
  readonly onChange?: Effect.Effect<void>
}

/** True for the events whose routes `RunHooks.onEmit` registers or drops. */
const isRouted = (event: TurnEvent): boolean =>
  event.type === "permission_request" || event.type === "permission_cancel" || event.type === "prompt_for_user_choice" ||
  event.type === "function_call"

/**
 * An adapter's error payload as the wire allows it (`RunEvents.normalizeEngineFailure`): an unknown code is
 * dropped, `http_status` survives only with `connection_failed`. A mis-classified failure loses its
 * classification, never the frame.
 */
export const normalizeErrorPayload = (payload: ErrorPayload): ErrorPayload => {
  if (payload.code === undefined && payload.http_status === undefined) return payload
  const failure = normalizeEngineFailure(payload.code, payload.http_status)
  if (Option.isNone(failure)) return { error: payload.error }
  return failure.value.httpStatus === undefined
    ? { error: payload.error, code: failure.value.code }
    : { error: payload.error, code: failure.value.code, http_status: failure.value.httpStatus }
}

/** The text of the `error` frame that replaces a Run event the codec refused (no adapter text, no code). */
export const RefusedEventText = "harness contract violation: a Run event could not be encoded and was not sent"

/** Adds the Run's trace (already validated once) to one of its frames. */
const traced = <M extends Messages.RuntimeToCore>(run: RunRecord, message: M): M =>
  run.trace === undefined ? message : { ...message, trace: run.trace }

/** A Run event as its wire frame, after opt-ins; `undefined` when the Run's opt-ins drop it. */
const toMessage = (run: RunRecord, event: TurnEvent): Messages.RuntimeToCore | undefined => {
  const message = untraced(run, event)
  return message === undefined ? undefined : traced(run, message)
}

const untraced = (run: RunRecord, event: TurnEvent): Messages.RuntimeToCore | undefined => {
  const id = run.runId
  const observeMessages = run.config.observe_messages === true
  switch (event.type) {
    case "delta":
      return {
        type: "delta",
        id,
        payload: observeMessages && event.item_id !== undefined
          ? { item_id: event.item_id, delta: event.delta, sequence: ++run.deltaSequence }
          : { delta: event.delta, sequence: ++run.deltaSequence }
      }
    case "thinking":
      return { type: "thinking", id, payload: { text: event.text, sequence: ++run.thinkingSequence } }
    case "output_message":
      return observeMessages ? { type: "output_message", id, payload: event.payload } : undefined
    case "tool_call": {
      if (run.config.observe_tool_observations === true || event.payload.observation === undefined) {
        return { type: "tool_call", id, payload: event.payload }
      }
      const { observation: _dropped, ...payload } = event.payload
      return { type: "tool_call", id, payload }
    }
    case "usage":
      return { type: "usage", id, payload: event.payload }
    case "error":
      return { type: "error", id, payload: normalizeErrorPayload(event.payload) }
    case "permission_request":
      return { type: "permission_request", id, payload: event.payload }
    case "permission_cancel":
      return { type: "permission_cancel", id: event.interactionId }
    case "prompt_for_user_choice":
      return { type: "prompt_for_user_choice", id, payload: event.payload }
    case "function_call":
      return { type: "function_call", id, payload: event.payload }
  }
}

export const make = (deps: RunsDeps) =>
  Effect.gen(function* () {
    const { outbound, executors, hooks } = deps
    const changed = deps.onChange ?? Effect.void
    const fibers = yield* FiberMap.make<RunId, void, never>()
    const table = new Map<RunId, RunRecord>()

    const done = (run: RunRecord, payload: DonePayload): Messages.RuntimeToCore =>
      traced(run, { type: "done", id: run.runId, payload })

    /**
     * Sends one frame the batch could not carry; a frame the codec refuses becomes a contract violation reported
     * on the Run (an `error` frame with neutral text), and a refused `done` is replaced by the smallest done that
     * encodes, so Core's stream always closes. Logs type, Run id, reason and size, never the payload.
     */
    const sendChecked = (run: RunRecord, message: Messages.RuntimeToCore): Effect.Effect<void, TransportClosed> =>
      outbound.send(message).pipe(
        Effect.catchTag("OutgoingFrameRejected", (refused) =>
          Effect.gen(function* () {
            yield* Effect.logError("run event refused by the codec; reported on the Run as a contract violation").pipe(
              Effect.annotateLogs({
                type: message.type,
                run_id: run.runId,
                reason: refused.reason,
                ...(refused.bytes === undefined ? {} : { bytes: refused.bytes })
              })
            )
            yield* sendOrLog(run, traced(run, { type: "error", id: run.runId, payload: { error: RefusedEventText } }))
            if (message.type !== "done") return
            const metadata = message.payload.metadata
            for (const payload of metadata === undefined ? [{ content: "" }] : [{ content: "", metadata }, { content: "" }]) {
              const sent = yield* Effect.result(outbound.send(done(run, payload)))
              if (Result.isSuccess(sent)) return
              if (sent.failure._tag === "TransportClosed") return yield* sent.failure
            }
          })
        )
      )

    const sendOrLog = (run: RunRecord, message: Messages.RuntimeToCore) =>
      outbound.send(message).pipe(
        Effect.catchTag("OutgoingFrameRejected", () =>
          Effect.logError("replacement frame refused by the codec").pipe(
            Effect.annotateLogs({ type: message.type, run_id: run.runId })
          ))
      )

    /**
     * The single consumer of a Run's output: takes whatever is queued and hands it to the transport as one batch
     * (frames in order; the batch resolves when its last frame was written locally). A batch the codec refuses
     * is sent frame by frame so only the refused frame is replaced. Ends when the queue ends (after `done`).
     */
    const forward = (run: RunRecord, queue: Queue.Dequeue<Messages.RuntimeToCore, Cause.Done>): Effect.Effect<void> => {
      let lost = false
      const onLost = (e: TransportClosed) =>
        lost ? Effect.void : Effect.sync(() => {
          lost = true
        }).pipe(
          Effect.andThen(Effect.logWarning("run frames not written: the connection is closing").pipe(
            Effect.annotateLogs({ run_id: run.runId, reason: e.reason })
          ))
        )
      const deliver = (batch: ReadonlyArray<Messages.RuntimeToCore>): Effect.Effect<void> =>
        outbound.sendAll(batch).pipe(
          Effect.catchTag("OutgoingFrameRejected", () => Effect.forEach(batch, (m) => sendChecked(run, m), { discard: true })),
          Effect.catchTag("TransportClosed", onLost)
        )
      return Queue.takeAll(queue).pipe(
        Effect.flatMap(deliver),
        Effect.forever,
        // The only failure is the end of the queue (Cause.Done): every frame, done included, was handed over.
        Effect.catch(() => Effect.void)
      )
    }

    /** Hands the Executor back after the Turn: retained idle when settled and reusable, otherwise closed. */
    const releaseExecutor = (entry: ExecutorEntry | undefined, reusable: boolean) =>
      entry === undefined ? Effect.void : reusable ? executors.toIdle(entry) : executors.closeInBackground(entry)

    const runFiber = (run: RunRecord, spec: RunSpec): Effect.Effect<void> => {
      let settlement: Result.Result<Settlement, SettlementUnconfirmed> | undefined
      const body = Effect.gen(function* () {
        const queue = yield* Queue.bounded<Messages.RuntimeToCore, Cause.Done>(RunOutputBuffer)
        // The single consumer of the Run's output starts before native start.
        const forwarder = yield* Effect.forkChild(forward(run, queue))
        const closeStream = (last: Messages.RuntimeToCore | undefined) =>
          Effect.gen(function* () {
            if (last !== undefined) yield* Queue.offer(queue, last)
            yield* Queue.end(queue)
            yield* Fiber.await(forwarder)
          })
        const refuse = (refusal: StartRefusal) =>
          Effect.gen(function* () {
            run.phase = "finished"
            yield* Deferred.fail(run.turnReady, new NoTurn())
            yield* Deferred.fail(run.nativeSettled, new NoTurn())
            if (spec.prepared) {
              yield* closeStream(undefined)
              yield* spec.onStartFailed(refusal)
            } else {
              yield* Queue.offer(queue, traced(run, { type: "error", id: run.runId, payload: { error: refusal.reason } }))
              yield* closeStream(done(run, { content: "" }))
            }
            yield* Deferred.succeed(run.finished, undefined)
            table.delete(run.runId)
            yield* changed
            yield* hooks.onEnd(run)
          })

        const acquired = yield* Effect.result(spec.acquire)
        if (Result.isFailure(acquired)) return yield* refuse(acquired.failure)
        const entry = acquired.success
        run.executor = entry
        yield* changed
        yield* executors.setState(entry, "busy")
        const native = entry.native
        if (native === undefined) {
          yield* releaseExecutor(entry, false)
          return yield* refuse({ reason: "the executor has no native owner", code: "executor_unavailable" })
        }
        /** Queues a frame: synchronously while there is room, otherwise waiting (the Turn is slowed, nothing dropped). */
        const offer = (message: Messages.RuntimeToCore): Effect.Effect<void> =>
          Queue.offerUnsafe(queue, message) ? Effect.void : Effect.asVoid(Queue.offer(queue, message))
        // The per-event path: no span, no generator; routes are registered before their frame is queued.
        const sink: TurnSink = {
          emit: (event) =>
            Effect.suspend(() => {
              const message = toMessage(run, event)
              if (isRouted(event)) {
                const registered = hooks.onEmit(run, event)
                return message === undefined ? registered : Effect.andThen(registered, Effect.suspend(() => offer(message)))
              }
              return message === undefined ? Effect.void : offer(message)
            })
        }
        const started = yield* Effect.result(native.startTurn(run.runId, spec.input, sink))
        if (Result.isFailure(started)) {
          // StartFailed guarantees nothing was submitted: the Executor is still healthy.
          yield* releaseExecutor(entry, true)
          return yield* refuse({ reason: started.failure.reason, code: "executor_unavailable" })
        }
        const turn = started.success
        run.turn = turn
        run.phase = "running"
        yield* changed
        yield* Deferred.succeed(run.turnReady, turn)
        yield* spec.onStarted

        settlement = yield* Effect.result(turn.awaitSettlement)
        // Input and function admission close here; cancellation receipts waiting now own the outcome.
        run.phase = "settling"
        run.receiptsOwnOutcome = run.receiptWaiters > 0
        yield* changed
        yield* Result.isSuccess(settlement)
          ? Deferred.succeed(run.nativeSettled, settlement.success)
          : Deferred.fail(run.nativeSettled, settlement.failure)
        yield* hooks.beforeDone(run)
        if (Result.isSuccess(settlement)) {
          const s = settlement.success
          yield* closeStream(done(run, s.outcome === "cancelled" && run.receiptsOwnOutcome ? { content: "" } : s.done))
        } else {
          // Settlement unconfirmed: no done is fabricated; the Executor is closed below.
          yield* Effect.logWarning("turn settlement unconfirmed").pipe(Effect.annotateLogs({ run_id: run.runId }))
          yield* closeStream(undefined)
        }
        run.phase = "finished"
        yield* Deferred.succeed(run.finished, undefined)
        table.delete(run.runId)
        yield* changed
        yield* hooks.onEnd(run)
        yield* releaseExecutor(entry, Result.isSuccess(settlement) && settlement.success.reusable)
      })

      /** Local stop (disconnect, device_shutdown): cancel natively, wait for settlement (bounded), no frames. */
      const stopLocally: Effect.Effect<void> = Effect.gen(function* () {
        const wasFinished = run.phase === "finished"
        run.phase = "finished"
        table.delete(run.runId)
        if (wasFinished) return
        yield* changed
        yield* Deferred.fail(run.turnReady, new NoTurn())
        let reusable = false
        const turn = run.turn
        if (turn !== undefined) {
          if (settlement === undefined) {
            yield* turn.cancel.pipe(Effect.ignore)
            reusable = yield* turn.awaitSettlement.pipe(
              Effect.map((s): boolean => s.reusable),
              Effect.catch(() => Effect.succeed(false)),
              Effect.timeoutOrElse({ duration: CancelSettlementBudget, orElse: () => Effect.succeed(false) })
            )
          } else {
            reusable = Result.isSuccess(settlement) && settlement.success.reusable
          }
        }
        yield* hooks.onEnd(run)
        yield* releaseExecutor(run.executor, reusable)
      })

      return body.pipe(Effect.onInterrupt(() => stopLocally))
    }

    const ack = (
      runId: RunId,
      deliveryId: DeliveryId,
      trace: string | undefined,
      result: { readonly applied: true; readonly outcome: DonePayload } | { readonly applied: false; readonly code: CancelErrorCode }
    ) =>
      outbound.sendWithin(
        withTrace({
          type: "interaction_decision_ack",
          id: unsafeMake.ackSubjectId(runId),
          payload: result.applied
            ? { delivery_id: deliveryId, applied: true, outcome: result.outcome }
            : { delivery_id: deliveryId, applied: false, error_code: result.code }
        }, trace),
        ReceiptSendBudget
      )

    type CancelResult =
      | { readonly _tag: "Settled"; readonly settlement: Result.Result<Settlement, SettlementUnconfirmed | NoTurn> }
      | { readonly _tag: "RequestFailed" }
      | { readonly _tag: "Timeout" }

    const cancel = (runId: RunId, deliveryId: DeliveryId | undefined, trace: string | undefined) =>
      Effect.gen(function* () {
        const run = table.get(runId)
        if (run === undefined || run.phase === "settling" || run.phase === "finished") {
          // The Turn already settled on its own (or there is no Run): nothing to cancel. The receipt follows the
          // Run's done when one is still coming.
          if (deliveryId !== undefined) {
            const after = run === undefined ? Effect.void : Deferred.await(run.finished)
            yield* FiberSet.run(deps.background, Effect.andThen(after, ack(runId, deliveryId, trace, { applied: false, code: "run_inactive" })))
          }
          return
        }
        run.cancelRequested = true
        yield* changed
        if (deliveryId !== undefined) run.receiptWaiters++
        // The native cancel request belongs to the connection, not to the waiter: a waiter that times out
        // stops observing and never interrupts the request.
        const requested = yield* Deferred.make<void, "failed" | "no_turn">()
        yield* FiberSet.run(
          deps.background,
          Deferred.await(run.turnReady).pipe(
            Effect.mapError(() => "no_turn" as const),
            Effect.flatMap((turn) => Effect.mapError(turn.cancel, () => "failed" as const)),
            Effect.matchEffect({
              onFailure: (e) => Deferred.fail(requested, e),
              onSuccess: () => Deferred.succeed(requested, undefined)
            })
          )
        )
        if (deliveryId === undefined) return
        const waiter = Effect.gen(function* () {
          const result: CancelResult = yield* Deferred.await(requested).pipe(
            Effect.flatMap(() => Effect.result(Deferred.await(run.nativeSettled))),
            Effect.map((settlement): CancelResult => ({ _tag: "Settled", settlement })),
            Effect.catch((e) =>
              e === "no_turn"
                ? Effect.succeed<CancelResult>({ _tag: "Settled", settlement: Result.fail(new NoTurn()) })
                : Effect.sync((): CancelResult => {
                  run.receiptWaiters--
                  return { _tag: "RequestFailed" }
                })
            ),
            Effect.timeoutOrElse({
              duration: CancelSettlementBudget,
              // A settlement that raced the deadline wins; otherwise this waiter stops observing and is no longer
              // counted (checked and uncounted in one synchronous step, so done then carries the snapshot).
              orElse: () =>
                Effect.suspend(() => {
                  if (Deferred.isDoneUnsafe(run.nativeSettled)) {
                    return Effect.map(Effect.result(Deferred.await(run.nativeSettled)), (settlement): CancelResult => ({
                      _tag: "Settled",
                      settlement
                    }))
                  }
                  run.receiptWaiters--
                  return Effect.succeed<CancelResult>({ _tag: "Timeout" })
                })
            })
          )
          if (result._tag !== "Settled") {
            return yield* ack(runId, deliveryId, trace, {
              applied: false,
              code: result._tag === "Timeout" ? "cancel_timeout" : "cancel_failed"
            })
          }
          const s = result.settlement
          if (Result.isFailure(s)) {
            return yield* ack(runId, deliveryId, trace, {
              applied: false,
              code: s.failure._tag === "NoTurn" ? "run_inactive" : "cancel_outcome_unavailable"
            })
          }
          // The receipt follows the Run's done (which closes the stream).
          yield* Deferred.await(run.finished)
          return yield* s.success.outcome === "cancelled"
            ? ack(runId, deliveryId, trace, { applied: true, outcome: s.success.done })
            : ack(runId, deliveryId, trace, { applied: false, code: "run_inactive" })
        })
        yield* FiberSet.run(deps.background, waiter)
      })

    const runs: Runs = {
      start: (spec) =>
        Effect.gen(function* () {
          if (table.has(spec.runId)) return Result.fail("run_conflict" as const)
          const run: RunRecord = {
            runId: spec.runId,
            kind: spec.kind,
            prepared: spec.prepared,
            requestId: spec.requestId,
            trace: echo(spec.trace),
            config: spec.config,
            snapshot: spec.snapshot,
            executor: undefined,
            phase: "starting",
            turn: undefined,
            turnReady: Deferred.makeUnsafe(),
            nativeSettled: Deferred.makeUnsafe(),
            finished: Deferred.makeUnsafe(),
            cancelRequested: false,
            receiptWaiters: 0,
            receiptsOwnOutcome: false,
            inputs: makeRunInputs(),
            pendingCalls: new Set(),
            deltaSequence: 0,
            thinkingSequence: 0
          }
          table.set(spec.runId, run)
          yield* changed
          yield* FiberMap.run(fibers, spec.runId, runFiber(run, spec))
          return Result.succeed(run)
        }),
      get: (runId) => Effect.sync(() => Option.fromNullishOr(table.get(runId))),
      cancel,
      stopAll: FiberMap.clear(fibers),
      activeCount: Effect.sync(() => table.size),
      view: Effect.sync(() =>
        [...table.values()].map((run) => ({
          run_id: run.runId,
          ...(run.requestId === undefined ? {} : { request_id: run.requestId }),
          kind: run.kind,
          ...(run.executor === undefined ? {} : { executor_id: run.executor.id }),
          state: run.phase === "settling" ? "settling" as const : run.cancelRequested ? "cancelling" as const : "running" as const
        }))
      )
    }
    return runs
  })
