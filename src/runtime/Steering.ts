/**
 * Active input receipts, Runtime side (protocol "Active input receipts", reference part 2 §2): `prompt_steer`
 * and `prompt_steer_ack`.
 *
 * Receipts are kept per Run, keyed by input id. A duplicate with the same content gets the stored receipt
 * (the final one when known, otherwise `in_flight` or `written`); a stored `not_ready` / `busy` lets the
 * retry proceed; other content or another durable flag is `input_conflict`; 256 distinct ids per Run is
 * `input_limit`. One input is in flight per Run (`busy`). `durable_receipt: true` needs
 * `durable_input_receipts` in the admitted snapshot (and a settlement contract: a prepared start or
 * `release_on_completion`), false needs `steering`.
 *
 * Budgets: the native write is bounded at 10 s and the timer stops once the write completed (`written` is
 * sent then); a timeout is `outcome_unknown` and the input is never redelivered. `accepted` arrives under
 * the Turn lifetime. Each receipt send has its own 5 s budget in a connection-owned fiber (interrupted on
 * shutdown). Before done the Run waits at most 15 s for an in-flight input, then reports it unknown. A waiter
 * that times out or is interrupted stops observing; it never releases, closes or replays anything.
 *
 * After the Run stopped accepting input (settling, then ended): a repeat of an already-receipted input id is
 * answered from its record (same content: the stored receipt; other content: `input_conflict`), and once the
 * Run ended its final receipts are kept for `RuntimePolicy.endedRunReceiptRetention` (5 minutes; at most
 * `maxEndedRunReceipts` ended Runs per connection, EndedRunReceipts.ts). A new input id, or one whose
 * retention passed, is `run_inactive`. Records hold a SHA-256 digest of the input, never the input itself.
 */
import { Context, Deferred, Effect, Fiber, FiberSet, Layer, Option } from "effect"
import type { InputId, RunId } from "../proto/Ids.js"
import type { SteerErrorCode } from "../proto/ErrorCodes.js"
import { InFlightInputBeforeDone, MaxInputsPerRun, NativeWriteBudget, ReceiptSendBudget } from "../proto/Limits.js"
import { hasImages, validateInlineImages, validateMessageInput } from "../proto/MessageInput.js"
import type { PromptSteerAckPayload, PromptSteerPayload } from "../proto/Steering.js"
import { steerFingerprint } from "../proto/Steering.js"
import { Background } from "./ConnectionServices.js"
import { makeEndedRunReceipts } from "./EndedRunReceipts.js"
import { digest } from "./Fingerprint.js"
import { guarded } from "./harness/Harness.js"
import { Outbound, withTrace } from "./Outbound.js"
import { RunLifecycle } from "./RunLifecycle.js"
import type { RunRecord } from "./RunRecord.js"
import { Runs } from "./Runs.js"
import { RuntimePolicy } from "./RuntimePolicy.js"
import * as RuntimeMetrics from "./RuntimeMetrics.js"

/** Where one input id stands. `retryable` holds a stored `not_ready` / `busy` that lets a retry proceed. */
type InputState = "in_flight" | "written" | "final" | "retryable"

interface InputRecord {
  readonly inputId: InputId
  /** SHA-256 of the canonical input and durable flag (`steerFingerprint`). */
  readonly fingerprint: string
  state: InputState
  /** The last receipt stored for replay. */
  receipt: PromptSteerAckPayload
  /** Completes once this input reached a final receipt (and its send settled). */
  readonly settled: Deferred.Deferred<void>
  /** The trace of the delivery that admitted it. */
  readonly trace: string | undefined
}

/** Per-Run input receipts (this family's own state; dropped when the Run stops). */
interface RunInputs {
  readonly records: Map<string, InputRecord>
  inFlight: InputRecord | undefined
  /** Native steer calls of this Run, stopped when the Run ends (their receipts are final by then). */
  readonly nativeCalls: Set<Fiber.Fiber<unknown, unknown>>
}


const receipt = (inputId: string, code: SteerErrorCode | "accepted" | "written"): PromptSteerAckPayload =>
  code === "accepted"
    ? { input_id: inputId, accepted: true }
    : code === "written"
    ? { input_id: inputId, accepted: false, written: true }
    : { input_id: inputId, accepted: false, error_code: code }

export interface SteeringShape {
  /** Handles one decoded prompt_steer; never waits on native work or sends. */
  readonly handle: (runId: RunId, payload: PromptSteerPayload, trace: string | undefined) => Effect.Effect<void>
  /** The reply to a prompt_steer whose payload did not decode (input id unknown). */
  readonly replyInvalid: (runId: RunId, trace: string | undefined) => Effect.Effect<void>
}

const makeSteering = Effect.gen(function* () {
  const outbound = yield* Outbound
  const runs = yield* Runs
  const background = yield* Background
  const lifecycle = yield* RunLifecycle
  const policy = yield* RuntimePolicy
  const ended = makeEndedRunReceipts<PromptSteerAckPayload>(policy.endedRunReceiptRetention, policy.maxEndedRunReceipts)
  const perRun = new Map<RunRecord, RunInputs>()
  const inputsOf = (run: RunRecord): RunInputs => {
    let inputs = perRun.get(run)
    if (inputs === undefined) {
      inputs = { records: new Map(), inFlight: undefined, nativeCalls: new Set() }
      perRun.set(run, inputs)
    }
    return inputs
  }

  const send = (runId: RunId, payload: PromptSteerAckPayload, trace: string | undefined) =>
    Effect.andThen(
      RuntimeMetrics.steerReceipt(payload),
      outbound.sendWithin(withTrace({ type: "prompt_steer_ack", id: runId, payload }, trace), ReceiptSendBudget)
    )

  const replyLater = (runId: RunId, payload: PromptSteerAckPayload, trace: string | undefined) =>
    FiberSet.run(background, send(runId, payload, trace)).pipe(Effect.asVoid)

  /**
   * Makes a receipt final exactly once; later outcomes for the same input are ignored. `keepSlot`: the native
   * call is still running (its write timed out), so the Run's in-flight slot stays owned until it returns.
   */
  const finalize = (run: RunRecord, record: InputRecord, code: SteerErrorCode | "accepted", keepSlot = false) =>
    Effect.gen(function* () {
      if (record.state === "final") return
      record.state = "final"
      record.receipt = receipt(record.inputId, code)
      if (!keepSlot && inputsOf(run).inFlight === record) inputsOf(run).inFlight = undefined
      yield* send(run.runId, record.receipt, record.trace)
      yield* Deferred.succeed(record.settled, undefined)
    })

  const codeOf = (error: { readonly _tag: string }): SteerErrorCode => {
    switch (error._tag) {
      case "CapabilityUnsupported":
        return "unsupported"
      case "ContractViolation":
        return "contract_violation"
      case "NativeRejected":
        return "rejected"
      case "NotReady":
        return "not_ready"
      default:
        return "outcome_unknown"
    }
  }

  /** Writes one admitted input and reports its receipts. Runs in a connection-owned fiber. */
  const attempt = (run: RunRecord, record: InputRecord, payload: PromptSteerPayload) =>
    Effect.gen(function* () {
      const turn = run.turn
      if (turn === undefined) return yield* finalize(run, record, "not_ready")
      const durable = payload.durable_receipt === true
      const written = yield* Deferred.make<void>()
      const native = yield* guarded(
        run.snapshot,
        durable ? "durable_input_receipts" : "steering",
        turn.steerWithReceipt(
          { inputId: record.inputId, input: payload.input, durable },
          Deferred.succeed(written, undefined).pipe(Effect.asVoid)
        )
      ).pipe(Effect.forkDetach)
      inputsOf(run).nativeCalls.add(native)
      // Phase one: the native write, bounded at 10 s; the timer stops once the write completed.
      const phase = yield* Effect.raceFirst(
        Deferred.await(written).pipe(Effect.as("written" as const)),
        Fiber.await(native).pipe(Effect.as("returned" as const))
      ).pipe(
        Effect.timeoutOrElse({
          duration: NativeWriteBudget,
          orElse: () => Effect.sync(() => (Deferred.isDoneUnsafe(written) ? "written" as const : "timeout" as const))
        })
      )
      if (phase === "timeout") {
        // Unknown, never replayed; the native write keeps running, so the slot stays owned (later inputs get
        // `busy`) until the native call returns or the Turn ends (which stops it).
        yield* finalize(run, record, "outcome_unknown", true)
        yield* Fiber.await(native)
        if (inputsOf(run).inFlight === record) inputsOf(run).inFlight = undefined
        return
      }
      // The write completed (the adapter may also have returned already): `written` goes out first.
      if (Deferred.isDoneUnsafe(written) && record.state === "in_flight") {
        record.state = "written"
        record.receipt = receipt(record.inputId, "written")
        if (durable) yield* send(run.runId, record.receipt, record.trace)
      }
      // Phase two: native acceptance, under the Turn lifetime (no budget of its own).
      const exit = yield* Fiber.await(native)
      if (exit._tag === "Success") return yield* finalize(run, record, "accepted")
      const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
      if (failure === undefined) return // interrupted: stop observing, report nothing
      const code = codeOf(failure.error as { readonly _tag: string })
      if (code === "not_ready" && record.state === "in_flight") {
        record.state = "retryable"
        record.receipt = receipt(record.inputId, code)
        if (inputsOf(run).inFlight === record) inputsOf(run).inFlight = undefined
        yield* send(run.runId, record.receipt, record.trace)
        return yield* Deferred.succeed(record.settled, undefined)
      }
      return yield* finalize(run, record, code === "not_ready" ? "outcome_unknown" : code)
    })

  const handle = (runId: RunId, payload: PromptSteerPayload, trace: string | undefined) =>
    Effect.gen(function* () {
      const inputId = payload.input_id
      if (
        Option.isSome(validateMessageInput(payload.input)) ||
        (hasImages(payload.input) && Option.isSome(validateInlineImages(payload.input)))
      ) {
        return yield* replyLater(runId, receipt(inputId, "invalid_input"), trace)
      }
      const fingerprint = digest(steerFingerprint(payload))
      const found = yield* runs.get(runId)
      if (Option.isNone(found) || found.value.phase === "settling" || found.value.phase === "finished") {
        return yield* replyLater(runId, yield* afterInput(runId, inputId, fingerprint), trace)
      }
      const run = found.value
      const inputs = inputsOf(run)
      const existing = inputs.records.get(inputId)
      if (existing !== undefined) {
        if (existing.fingerprint !== fingerprint) return yield* replyLater(runId, receipt(inputId, "input_conflict"), trace)
        if (existing.state === "final" || existing.state === "written") return yield* replyLater(runId, existing.receipt, trace)
        if (existing.state === "in_flight") return yield* replyLater(runId, receipt(inputId, "in_flight"), trace)
      } else if (inputs.records.size >= MaxInputsPerRun) {
        return yield* replyLater(runId, receipt(inputId, "input_limit"), trace)
      }
      const store = (state: InputState, code: SteerErrorCode | undefined) => {
        const record: InputRecord = {
          inputId,
          fingerprint,
          state,
          receipt: code === undefined ? { input_id: inputId, accepted: false } : receipt(inputId, code),
          settled: Deferred.makeUnsafe<void>(),
          trace
        }
        inputs.records.set(inputId, record)
        return record
      }
      const durable = payload.durable_receipt === true
      const capability = durable ? "durable_input_receipts" : "steering"
      if (!run.snapshot.capabilities[capability] || (durable && !run.prepared && run.config.release_on_completion !== true)) {
        return yield* replyLater(runId, store("final", "unsupported").receipt, trace)
      }
      if (run.turn === undefined) return yield* replyLater(runId, store("retryable", "not_ready").receipt, trace)
      if (inputs.inFlight !== undefined) return yield* replyLater(runId, store("retryable", "busy").receipt, trace)
      const record = store("in_flight", undefined)
      inputs.inFlight = record
      yield* FiberSet.run(background, attempt(run, record, payload))
    })

  /** Before done: wait at most 15 s for the in-flight input, then report it unknown. */
  const beforeDone = Effect.fnUntraced(function* (run: RunRecord) {
    const record = perRun.get(run)?.inFlight
    if (record === undefined) return
    yield* Deferred.await(record.settled).pipe(
      Effect.timeoutOrElse({
        duration: InFlightInputBeforeDone,
        orElse: () => finalize(run, record, "outcome_unknown")
      })
    )
  })

  /**
   * The receipt for an input on a Run that no longer accepts input: from the Run's own records while it settles,
   * from the ended Run's retained receipts afterwards, `run_inactive` for an id that has no receipt there.
   */
  const afterInput = (runId: RunId, inputId: InputId, fingerprint: string) =>
    Effect.gen(function* () {
      let known: { readonly fingerprint: string; readonly receipt: PromptSteerAckPayload } | undefined
      for (const [run, inputs] of perRun) {
        if (run.runId !== runId) continue
        const record = inputs.records.get(inputId)
        if (record !== undefined && record.state === "in_flight") {
          return record.fingerprint === fingerprint ? receipt(inputId, "in_flight") : receipt(inputId, "input_conflict")
        }
        if (record !== undefined && (record.state === "final" || record.state === "written")) known = record
      }
      if (known === undefined) known = Option.getOrUndefined(yield* ended.lookup(runId, inputId))
      if (known === undefined) return receipt(inputId, "run_inactive")
      return known.fingerprint === fingerprint ? known.receipt : receipt(inputId, "input_conflict")
    })

  /** The Run is over: stop observing its native steer calls; keep its final receipts for the retention time. */
  const stopped = (run: RunRecord) =>
    Effect.suspend(() => {
      const inputs = perRun.get(run)
      perRun.delete(run)
      if (inputs === undefined) return Effect.void
      const receipts = new Map<string, { readonly fingerprint: string; readonly receipt: PromptSteerAckPayload }>()
      for (const [id, record] of inputs.records) {
        if (record.state === "final" || record.state === "written") receipts.set(id, { fingerprint: record.fingerprint, receipt: record.receipt })
      }
      return Effect.andThen(ended.retain(run.runId, receipts), Fiber.interruptAll([...inputs.nativeCalls]))
    })

  yield* lifecycle.subscribe((event) =>
    event._tag === "Settled" ? beforeDone(event.run) : event._tag === "Stopped" ? stopped(event.run) : Effect.void
  )
  // The connection is closing: stop observing every native steer call still running.
  yield* Effect.addFinalizer(() => Fiber.interruptAll([...perRun.values()].flatMap((inputs) => [...inputs.nativeCalls])))

  return Steering.of({
    handle,
    replyInvalid: (runId, trace) => replyLater(runId, receipt("", "invalid_input"), trace)
  })
})

/** Active input receipts of one connection. */
export class Steering extends Context.Service<Steering, SteeringShape>()("agentwire/runtime/Steering") {
  static readonly layer = Layer.effect(Steering, makeSteering)
}
