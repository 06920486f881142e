/**
 * Core's side of active input (protocol "Active input receipts"; reference part 2 §2): one input at a time
 * per Run, delivered as `prompt_steer` with `durable_receipt: true`, with its receipts awaited before the
 * next input goes out.
 *
 * Phases and what they prove: `written` = the native write finished (consumption unconfirmed; the cursor
 * does not move); `accepted` = the adapter confirmed native consumption (the cursor advances: the caller
 * persists `InputAccepted.advance_cursor_to`). Core waits at most 30 s from delivery for `written`, then the
 * outcome is unknown (`InputOutcomeUnknown{written_ack_timeout}`, never a failure; a receipt that raced the
 * deadline wins). `accepted` is awaited under the Turn's lifetime. `not_ready` / `busy` resend the identical
 * payload after a short interval within the written window; other codes are definite rejections;
 * `outcome_unknown` stays unknown. Neither `written` nor a send failure advances the cursor.
 *
 * Never: redeliver an input whose outcome is unknown; send the next input of a Run before the previous one
 * resolved; let a caller's interruption settle anything (the Turn forks deliveries into its own scope).
 */
import { Clock, Duration, Effect, Option, Queue, Result, Semaphore, Stream } from "effect"
import { type Ids, Limits, type MessageInput, Messages, MessageInput as Input, Steering as SteerProto } from "../proto/index.js"
import { type Admitted, type EngineProfile, requireFeature } from "./CapabilityPolicy.js"
import { type DeviceSession, steerAckKey } from "./DeviceSession.js"
import { type NotSent, receiptLoss, type SubscriptionRejected } from "./Errors.js"
import { promptSteer } from "./ExecutionRequest.js"
import {
  type CapabilityUnsupported,
  InputInvalid,
  InputOutcomeUnknown,
  InputRejected,
  type InputUnknownReason
} from "./Outcome.js"

/** `accepted`: native consumption confirmed. Persist the cursor advance before delivering the next input. */
export interface InputAccepted {
  readonly run_id: Ids.RunId
  readonly input_id: Ids.InputId
  /** The input id the Run's input cursor now includes. */
  readonly advance_cursor_to: Ids.InputId
}

/** Progress a caller may journal (none of it advances the cursor). */
export type InputProgress =
  | { readonly _tag: "Dispatched"; readonly input_id: Ids.InputId } // the prompt_steer entered the send queue (first or resend)
  | { readonly _tag: "Written"; readonly input_id: Ids.InputId } // the native write finished
  | { readonly _tag: "Resending"; readonly input_id: Ids.InputId; readonly code: "not_ready" | "busy" }

export type SteerError =
  | InputInvalid
  | CapabilityUnsupported
  | NotSent
  | SubscriptionRejected
  | InputRejected
  | InputOutcomeUnknown

export interface SteeringOptions {
  /** The declaration the Turn was admitted with, and the engine profile (images need message_images). */
  readonly admitted: Admitted
  readonly engine: EngineProfile
  /** Completes when the Turn's event stream ended; pending receipts then get `graceAfterTurnEnd`. */
  readonly turnEnded?: Effect.Effect<void>
  /** How long receipts already on their way may still arrive after the Turn ended. Default 1 s. */
  readonly graceAfterTurnEnd?: Duration.Input
  /** Wait before resending after not_ready / busy. Default 250 ms. */
  readonly retryInterval?: Duration.Input
  /** Journal hook, called in order. */
  readonly observe?: (progress: InputProgress) => Effect.Effect<void>
}

export interface Steering {
  readonly runId: Ids.RunId
  /**
   * Delivers one input and waits for its outcome. Inputs of this Run are serialized: a second call waits
   * until the first resolved. Success proves native consumption (advance the cursor). Errors:
   * `InputInvalid` / `CapabilityUnsupported` / `NotSent` / `SubscriptionRejected` — definite, nothing (more)
   * was sent; `InputRejected` — the Runtime definitely did not apply it (`isRetryable` for not_ready/busy);
   * `InputOutcomeUnknown` — dispatched without proof; never redeliver automatically.
   */
  readonly deliver: (inputId: Ids.InputId, input: MessageInput.MessageInput) => Effect.Effect<InputAccepted, SteerError>
}

type Receipt = SteerProto.PromptSteerAckPayload

/** How a receipt wait ended without a receipt. */
type WaitEnd = { readonly _tag: "Deadline" } | { readonly _tag: "TurnEnded" } | { readonly _tag: "Lost"; readonly reason: InputUnknownReason }

const raceWindow = Effect.repeat(Effect.yieldNow, { times: 16 })

/**
 * Builds the per-Run steering channel (one input at a time). Most Turns are never steered: the lock is made at
 * the first `deliver` (synchronously, so every later call waits on the same one).
 */
export const make = (session: DeviceSession, runId: Ids.RunId, options: SteeringOptions): Effect.Effect<Steering> =>
  Effect.sync(() => {
    let lock: Semaphore.Semaphore | undefined
    return {
      runId,
      deliver: (inputId, input) =>
        Effect.suspend(() =>
          (lock ??= Semaphore.makeUnsafe(1)).withPermits(1)(deliverOne(session, runId, inputId, input, options))
        ).pipe(
          Effect.withSpan("Steering.deliver"),
          Effect.annotateLogs({ run_id: runId, input_id: inputId })
        )
    }
  })

const deliverOne = (
  session: DeviceSession,
  runId: Ids.RunId,
  inputId: Ids.InputId,
  input: MessageInput.MessageInput,
  options: SteeringOptions
): Effect.Effect<InputAccepted, SteerError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const ids = { run_id: runId, input_id: inputId }
      const observe = options.observe ?? (() => Effect.void)
      const grace = Duration.fromInputUnsafe(options.graceAfterTurnEnd ?? Duration.seconds(1))
      const retryInterval = Duration.fromInputUnsafe(options.retryInterval ?? Duration.millis(250))

      // ---- before dispatch: every failure is definite (the shared input rules and the inline image
      // profile in `promptSteer`, then the capability)
      const built = promptSteer(runId, inputId, input)
      if (Result.isFailure(built)) return yield* new InputInvalid({ ...ids, issue: built.failure.issue })
      if (Input.hasImages(input)) {
        const supported = requireFeature(options.admitted, options.engine, "message_images")
        if (Result.isFailure(supported)) return yield* supported.failure
      }
      const message: Messages.MessageOfType<"prompt_steer"> = built.success
      const receipts = yield* session.expectReplies("prompt_steer_ack", steerAckKey(runId, inputId))
      const queue = yield* Stream.toQueue(receipts, { capacity: "unbounded" })
      const deliveredAt = yield* Clock.currentTimeMillis
      yield* session.send(message)
      yield* observe({ _tag: "Dispatched", input_id: inputId })

      // ---- after dispatch: a missing receipt is unknown, never a failure
      let written = false
      let deadline = deliveredAt + Duration.toMillis(Limits.WrittenAckBudget)
      let ended = false
      const turnEnded = options.turnEnded

      /** The next receipt before `deadline` (undefined: no deadline), the Turn's end, or a lost stream. */
      const nextReceipt = (limitMs: number | undefined): Effect.Effect<Result.Result<Receipt, WaitEnd>> =>
        Effect.gen(function*() {
          const take = Effect.match(Queue.take(queue), {
            onFailure: (e): Result.Result<Receipt, WaitEnd> =>
              Result.fail({ _tag: "Lost", reason: receiptLoss(e) }),
            onSuccess: (m): Result.Result<Receipt, WaitEnd> => Result.succeed(m.payload)
          })
          const pollOnce = Effect.gen(function*() {
            yield* raceWindow
            const polled = yield* Queue.poll(queue)
            const out: Result.Result<Receipt, WaitEnd> = Option.isSome(polled)
              ? Result.succeed(polled.value.payload)
              : Result.fail({ _tag: "Deadline" })
            return out
          })
          const bounded = limitMs === undefined
            ? take
            : Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Effect.timeoutOrElse(take, { duration: Math.max(0, limitMs - now), orElse: () => pollOnce }))
          if (turnEnded === undefined || ended) return yield* bounded
          return yield* Effect.raceFirst(
            bounded,
            Effect.as(turnEnded, Result.fail({ _tag: "TurnEnded" }) as Result.Result<Receipt, WaitEnd>)
          )
        })

      while (true) {
        const next = yield* nextReceipt(written && !ended ? undefined : deadline)
        if (Result.isFailure(next)) {
          const end = next.failure
          if (end._tag === "TurnEnded") {
            // Receipts precede done on the wire; give the ones already on their way a short grace.
            ended = true
            const now = yield* Clock.currentTimeMillis
            deadline = written ? now + Duration.toMillis(grace) : Math.min(deadline, now + Duration.toMillis(grace))
            continue
          }
          if (end._tag === "Lost") return yield* new InputOutcomeUnknown({ ...ids, reason: end.reason })
          return yield* new InputOutcomeUnknown({ ...ids, reason: written || ended ? "turn_ended" : "written_ack_timeout" })
        }
        const phase = SteerProto.steerPhase(next.success)
        switch (phase._tag) {
          case "Accepted":
            return { run_id: runId, input_id: inputId, advance_cursor_to: inputId }
          case "Written":
            if (!written) {
              written = true
              yield* observe({ _tag: "Written", input_id: inputId })
            }
            continue
          case "Pending":
            continue
          case "Error": {
            const code = phase.code
            if (code === "in_flight") continue
            if (code === "outcome_unknown") {
              return yield* new InputOutcomeUnknown({ ...ids, reason: "runtime_outcome_unknown" })
            }
            if (code === "not_ready" || code === "busy") {
              // After `written` the input was admitted: a late retryable code establishes nothing.
              if (written) continue
              const now = yield* Clock.currentTimeMillis
              if (ended || now + Duration.toMillis(retryInterval) >= deadline) {
                // The last receipt proves the input was not admitted; no resend is outstanding.
                return yield* new InputRejected({ ...ids, code })
              }
              yield* Effect.sleep(retryInterval)
              yield* observe({ _tag: "Resending", input_id: inputId, code })
              yield* Effect.catch(session.send(message), () =>
                // The identical payload could not be queued again; the last receipt stays authoritative.
                Effect.fail(new InputRejected({ ...ids, code })))
              yield* observe({ _tag: "Dispatched", input_id: inputId })
              continue
            }
            return yield* new InputRejected({ ...ids, code })
          }
        }
      }
    })
  )

/** Brands a caller-chosen input id (Core uses its durable input sequence number). */
export const inputId = (value: string): Ids.InputId => value as Ids.InputId

export { steerAckKey }
