/**
 * Runs of one connection (protocol "Preparation and execution order" step 4, "Active input receipts",
 * reference part 1 §7–§8): the Run table, each Run's bounded output buffer and its single forwarder and the
 * terminal `done`.
 *
 * A Run fiber owns its Turn: it starts the forwarder before native start, numbers deltas from 1, applies the
 * Run's opt-ins, waits for native settlement, lets in-flight inputs settle (bounded), then publishes `done`
 * and hands the Executor back (retained idle, or closed). An execution error is followed by done.
 *
 * Cancellation receipts (`Cancellation.ts`) own the terminal outcome: when receipts wait at settlement
 * (`receiptWaiters`), `done` carries no content and the receipts carry the continuity snapshot.
 *
 * Lifecycle: the Run publishes `RunLifecycle` events (Started, Emitted for interaction and function events
 * before their frame is queued, Settled before `done`, OutputClosed, Stopped); the families that follow a Run
 * subscribe to them and keep their own per-Run state. This module knows none of them.
 *
 * Never does: report a local interruption (disconnect, device_shutdown, process exit) as a cancellation,
 * fabricate `error`/`done` when observation is lost, or release an Executor whose Turn did not settle.
 */
import { Clock, Context, Deferred, Effect, Fiber, FiberMap, Layer, Option, Result } from "effect"
import type { RunId } from "../proto/Ids.js"
import { type EncodedFrame, encodeDoneParts, encodeFrame, deltaEncoder } from "../proto/EncodedFrame.js"
import { CancelSettlementBudget, RunOutputBuffer } from "../proto/Limits.js"
import { Messages } from "../proto/index.js"
import type { DonePayload } from "../proto/RunEvents.js"
import { echo } from "../proto/Trace.js"
import { type ExecutorEntry, Executors } from "./Executors.js"
import type { Settlement, TurnEvent, TurnSink } from "./harness/Harness.js"
import type { SettlementUnconfirmed } from "./harness/Harness.js"
import { Outbound } from "./Outbound.js"
import { encodeDelta, encodeEvent, isRouted, RefusedEventText, traced } from "./RunFrames.js"
import { RunLifecycle } from "./RunLifecycle.js"
import * as RunOutput from "./RunOutput.js"
import { NoTurn, type RunRecord, type RunSpec, type StartRefusal } from "./RunRecord.js"
import { StatusBoard } from "./StatusBoard.js"
import type { TransportClosed } from "./transport/Transport.js"
import type { RunStatus } from "./StatusBoard.js"
import * as RuntimeMetrics from "./RuntimeMetrics.js"

export { NoTurn, RefusedEventText }
export type { RunRecord, RunSpec, StartRefusal }

export interface RunsShape {
  /** Registers and forks a Run; `run_conflict` when the Run id is active on this connection. */
  readonly start: (spec: RunSpec) => Effect.Effect<Result.Result<RunRecord, "run_conflict">>
  readonly get: (runId: RunId) => Effect.Effect<Option.Option<RunRecord>>
  /** Stops every Run locally (device_shutdown): no receipt, no done; returns when each Run's cleanup ran. */
  readonly stopAll: Effect.Effect<void>
  readonly activeCount: Effect.Effect<number>
  /** The ids of the Runs active now (a copy). */
  readonly activeIds: Effect.Effect<ReadonlySet<RunId>>
  readonly view: Effect.Effect<ReadonlyArray<typeof RunStatus.Type>>
}

/** A Run's native settlement once awaited, shared by its body and its local stop (`runFiber`). */
interface RunSettled {
  settlement: Result.Result<Settlement, SettlementUnconfirmed> | undefined
}

const makeRuns = Effect.gen(function* () {
    const outbound = yield* Outbound
    const executors = yield* Executors
    const lifecycle = yield* RunLifecycle
    const changed = (yield* StatusBoard).touch
    const fibers = yield* FiberMap.make<RunId, void, never>()
    const table = new Map<RunId, RunRecord>()

    const done = (run: RunRecord, payload: DonePayload): Messages.RuntimeToCore =>
      traced(run, { type: "done", id: run.runId, payload })

    /**
     * The frames that replace one the codec refused: a contract violation reported on the Run (an `error` frame
     * with neutral text) and, for a refused `done`, the smallest done that encodes, so Core's stream always
     * closes. Logs type, Run id, reason and size, never the payload.
     */
    const replacements = (
      run: RunRecord,
      refused: Messages.OutgoingFrameRejected,
      refusedDone: DonePayload | undefined
    ): Effect.Effect<ReadonlyArray<EncodedFrame>> =>
      Effect.gen(function* () {
        yield* Effect.logError("run event refused by the codec; reported on the Run as a contract violation").pipe(
          Effect.annotateLogs({
            type: refused.type,
            run_id: run.runId,
            reason: refused.reason,
            ...(refused.bytes === undefined ? {} : { bytes: refused.bytes })
          })
        )
        const frames: Array<EncodedFrame> = []
        const error = encodeFrame(traced(run, { type: "error", id: run.runId, payload: { error: RefusedEventText } }))
        if (Result.isSuccess(error)) frames.push(error.success)
        else {
          yield* Effect.logError("replacement frame refused by the codec").pipe(
            Effect.annotateLogs({ type: "error", run_id: run.runId })
          )
        }
        if (refusedDone === undefined) return frames
        const metadata = refusedDone.metadata
        for (const payload of metadata === undefined ? [{ content: "" }] : [{ content: "", metadata }, { content: "" }]) {
          const encoded = encodeFrame(done(run, payload))
          if (Result.isSuccess(encoded)) {
            frames.push(encoded.success)
            break
          }
        }
        return frames
      })

    /** One frame the Run produces itself (error, done) as the frames to queue: itself, or its replacements. */
    const encodeChecked = (run: RunRecord, message: Messages.RuntimeToCore): Effect.Effect<ReadonlyArray<EncodedFrame>> => {
      const encoded = encodeFrame(message)
      return Result.isSuccess(encoded)
        ? Effect.succeed([encoded.success])
        : replacements(run, encoded.failure, message.type === "done" ? message.payload : undefined)
    }

    /** The `done` of a settlement whose content came as parts (`Settlement.contentParts`), as the frames to queue. */
    const doneFromParts = (run: RunRecord, payload: DonePayload, parts: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<EncodedFrame>> => {
      const message = done(run, payload) as Messages.RuntimeToCore & { readonly type: "done" }
      const encoded = encodeDoneParts(message, parts)
      return Result.isSuccess(encoded)
        ? Effect.succeed([encoded.success])
        : replacements(run, encoded.failure, payload)
    }

    /**
     * The single consumer of a Run's output: takes whatever is queued (frames already encoded) and hands it to
     * the transport as one batch (frames in order; the batch resolves when its last frame was written locally).
     * Ends when the queue ends (after `done`).
     */
    const forward = (run: RunRecord, queue: RunOutput.RunOutput<EncodedFrame>): Effect.Effect<void> => {
      let lost = false
      const onLost = (e: TransportClosed) =>
        lost ? Effect.void : Effect.sync(() => {
          lost = true
        }).pipe(
          Effect.andThen(Effect.logWarning("run frames not written: the connection is closing").pipe(
            Effect.annotateLogs({ run_id: run.runId, reason: e.reason })
          ))
        )
      // One handler for both failures, built once per Run (issue 18, relay: `Effect.catchTags` per 64-frame batch,
      // its dual form and its filter included, was 2.5 % of the daemon's relay samples).
      const recover = (e: TransportClosed | Messages.OutgoingFrameRejected): Effect.Effect<void> =>
        e._tag === "TransportClosed"
          ? onLost(e)
          // Unreachable: every frame was encoded when it was queued.
          : Effect.logError("encoded run frames refused by the transport").pipe(
            Effect.annotateLogs({ type: e.type, run_id: run.runId })
          )
      const deliver = (batch: ReadonlyArray<EncodedFrame>): Effect.Effect<void> => Effect.catch(outbound.sendAll(batch), recover)
      return queue.takeAll.pipe(
        Effect.flatMap(deliver),
        Effect.forever,
        // The only failure is the end of the queue (Cause.Done): every frame, done included, was handed over.
        Effect.catch(() => Effect.void)
      )
    }

    /** Hands the Executor back after the Turn: retained idle when settled and reusable, otherwise closed. */
    const releaseExecutor = (entry: ExecutorEntry | undefined, reusable: boolean) =>
      entry === undefined ? Effect.void : reusable ? executors.toIdle(entry) : executors.closeInBackground(entry)

    // The Run's body and its local stop are generator functions made once, not per Run (docs/performance.md,
    // "generators"); what they share is the Run's `RunSettled`.
    const runBody = Effect.fnUntraced(function* (run: RunRecord, spec: RunSpec, settled: RunSettled) {
      const queue = yield* RunOutput.make<EncodedFrame>(RunOutputBuffer)
      // The single consumer of the Run's output starts before native start.
      const forwarder = yield* Effect.forkChild(forward(run, queue))
      /** Queues a frame: synchronously while there is room, otherwise waiting (the Turn is slowed, nothing dropped). */
      const offer = (frame: EncodedFrame): Effect.Effect<void> =>
        queue.offerUnsafe(frame) ? Effect.void : queue.offer(frame)
      const offerAll = (frames: ReadonlyArray<EncodedFrame>): Effect.Effect<void> =>
        Effect.forEach(frames, offer, { discard: true })
      const queueChecked = (message: Messages.RuntimeToCore) => Effect.flatMap(encodeChecked(run, message), offerAll)
      const closeStreamWith = (last: Effect.Effect<ReadonlyArray<EncodedFrame>> | undefined) =>
        Effect.andThen(
          Effect.andThen(last === undefined ? Effect.void : Effect.flatMap(last, offerAll), queue.end),
          Effect.asVoid(Fiber.await(forwarder))
        )
      const closeStream = (last: Messages.RuntimeToCore | undefined) =>
        closeStreamWith(last === undefined ? undefined : encodeChecked(run, last))
      const refuse = (refusal: StartRefusal) =>
        Effect.gen(function* () {
          run.phase = "finished"
          yield* Deferred.fail(run.turnReady, new NoTurn())
          yield* Deferred.fail(run.nativeSettled, new NoTurn())
          if (spec.prepared) {
            yield* closeStream(undefined)
            yield* spec.onStartFailed(refusal)
          } else {
            yield* queueChecked(traced(run, { type: "error", id: run.runId, payload: { error: refusal.reason } }))
            yield* closeStream(done(run, { content: "" }))
          }
          yield* Deferred.succeed(run.finished, undefined)
          table.delete(run.runId)
          yield* changed
          yield* lifecycle.publish({ _tag: "Stopped", run })
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
      // The per-event path: no span, no generator, the frame encoded once here; routes are registered before
      // their frame is queued.
      const queueEncoded = (frame: Result.Result<EncodedFrame, Messages.OutgoingFrameRejected>): Effect.Effect<void> =>
        Result.isSuccess(frame) ? offer(frame.success) : Effect.flatMap(replacements(run, frame.failure, undefined), offerAll)
      // A delta from its text: no event object, no `Result` (`TurnSink.deltaUnsafe`).
      const deltaUnsafe = (text: string, itemId: string | undefined): Effect.Effect<void> | undefined => {
        const frame = encodeDelta(run, text, itemId)
        if (frame instanceof Messages.OutgoingFrameRejected) return Effect.flatMap(replacements(run, frame, undefined), offerAll)
        return queue.offerUnsafe(frame) ? undefined : queue.offer(frame)
      }
      // A frame queued while there is room needs no Effect at all (`TurnSink.emitUnsafe`).
      const emitUnsafe = (event: TurnEvent): Effect.Effect<void> | undefined => {
        if (event.type === "delta") return deltaUnsafe(event.delta, event.item_id)
        const frame = encodeEvent(run, event)
        if (isRouted(event)) {
          const registered = lifecycle.publish({ _tag: "Emitted", run, event })
          return frame === undefined ? registered : Effect.andThen(registered, Effect.suspend(() => queueEncoded(frame)))
        }
        if (frame === undefined) return undefined
        if (Result.isSuccess(frame) && queue.offerUnsafe(frame.success)) return undefined
        return Result.isSuccess(frame) ? queue.offer(frame.success) : queueEncoded(frame)
      }
      const sink: TurnSink = {
        emit: (event) => Effect.suspend(() => emitUnsafe(event) ?? Effect.void),
        emitUnsafe,
        deltaUnsafe
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
      yield* lifecycle.publish({ _tag: "Started", run })
      yield* RuntimeMetrics.runStarted
      const startedAt = yield* Clock.currentTimeMillis
      yield* Effect.logInfo("run started").pipe(Effect.annotateLogs({ run_id: run.runId, kind: spec.kind }))
      yield* spec.onStarted

      const settlement = yield* Effect.result(turn.awaitSettlement)
      settled.settlement = settlement
      // Input and function admission close here; cancellation receipts waiting now own the outcome.
      run.phase = "settling"
      run.receiptsOwnOutcome = run.receiptWaiters > 0
      yield* changed
      yield* Result.isSuccess(settlement)
        ? Deferred.succeed(run.nativeSettled, settlement.success)
        : Deferred.fail(run.nativeSettled, settlement.failure)
      yield* lifecycle.publish({ _tag: "Settled", run })
      const durationMs = (yield* Clock.currentTimeMillis) - startedAt
      if (Result.isSuccess(settlement)) {
        const s = settlement.success
        yield* Effect.logInfo("run finished").pipe(
          Effect.annotateLogs({ run_id: run.runId, kind: spec.kind, outcome: s.outcome, duration_ms: durationMs })
        )
        yield* s.outcome === "cancelled" && run.receiptsOwnOutcome
          ? closeStream(done(run, { content: "" }))
          : s.contentParts === undefined
          ? closeStream(done(run, s.done))
          : closeStreamWith(doneFromParts(run, s.done, s.contentParts))
      } else {
        // Settlement unconfirmed: no done is fabricated; the Executor is closed below.
        yield* Effect.logWarning("turn settlement unconfirmed").pipe(Effect.annotateLogs({ run_id: run.runId, duration_ms: durationMs }))
        yield* closeStream(undefined)
      }
      yield* lifecycle.publish({ _tag: "OutputClosed", run })
      yield* RuntimeMetrics.runFinished(Result.isSuccess(settlement) ? settlement.success.outcome : "unconfirmed")
      run.phase = "finished"
      yield* Deferred.succeed(run.finished, undefined)
      table.delete(run.runId)
      yield* changed
      yield* lifecycle.publish({ _tag: "Stopped", run })
      yield* releaseExecutor(entry, Result.isSuccess(settlement) && settlement.success.reusable)
    })

    /** Local stop (disconnect, device_shutdown): cancel natively, wait for settlement (bounded), no frames. */
    const stopLocally = Effect.fnUntraced(function* (run: RunRecord, settled: RunSettled) {
      const wasFinished = run.phase === "finished"
      run.phase = "finished"
      table.delete(run.runId)
      if (wasFinished) return
      yield* changed
      yield* Deferred.fail(run.turnReady, new NoTurn())
      let reusable = false
      const turn = run.turn
      if (turn !== undefined) {
        yield* RuntimeMetrics.runFinished("stopped_locally")
        if (settled.settlement === undefined) {
          yield* turn.cancel.pipe(Effect.ignore)
          reusable = yield* turn.awaitSettlement.pipe(
            Effect.map((s): boolean => s.reusable),
            Effect.catch(() => Effect.succeed(false)),
            Effect.timeoutOrElse({ duration: CancelSettlementBudget, orElse: () => Effect.succeed(false) })
          )
        } else {
          reusable = Result.isSuccess(settled.settlement) && settled.settlement.success.reusable
        }
      }
      yield* lifecycle.publish({ _tag: "Stopped", run })
      yield* releaseExecutor(run.executor, reusable)
    })

    const runFiber = (run: RunRecord, spec: RunSpec): Effect.Effect<void> => {
      const settled: RunSettled = { settlement: undefined }
      return runBody(run, spec, settled).pipe(Effect.onInterrupt(() => stopLocally(run, settled)))
    }

    const runs: RunsShape = {
      start: Effect.fnUntraced(function* (spec: RunSpec) {
        if (table.has(spec.runId)) return Result.fail("run_conflict" as const)
        const trace = echo(spec.trace)
        const run: RunRecord = {
          runId: spec.runId,
          kind: spec.kind,
          prepared: spec.prepared,
          requestId: spec.requestId,
          trace,
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
          deltaSequence: 0,
          thinkingSequence: 0,
          encodeDelta: deltaEncoder(spec.runId, trace)
        }
        table.set(spec.runId, run)
        yield* changed
        yield* FiberMap.run(fibers, spec.runId, runFiber(run, spec))
        return Result.succeed(run)
      }),
      get: (runId) => Effect.sync(() => Option.fromNullishOr(table.get(runId))),
      stopAll: FiberMap.clear(fibers),
      activeCount: Effect.sync(() => table.size),
      activeIds: Effect.sync(() => new Set(table.keys())),
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
    return Runs.of(runs)
  })

/** The Run table of one connection. */
export class Runs extends Context.Service<Runs, RunsShape>()("agentwire/runtime/Runs") {
  static readonly layer = Layer.effect(Runs, makeRuns)
}
