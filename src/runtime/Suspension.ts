/**
 * Suspension fencing on one connection (reference §8.1; protocol "Message families"): `environment_quiesce`
 * and `environment_resume`, and the fence that keeps admission closed while a suspension is in progress.
 *
 * Quiesce (only on an open connection):
 * - `invalid_request` when this daemon has no bound Environment, the request names another one, or it carries
 *   `rollback: true`;
 * - `resource_busy` while anything is unsettled: a `runtime_prepare` transfer, Runs, workspace reads, a write or export, pending
 *   interactions, an owned preparation (an admission that is not terminal), an Executor that is not idle, an
 *   idle Executor for another Environment, a `device_shutdown` drain — or when the suspension state cannot be
 *   persisted;
 * - otherwise the fence closes at once (every later frame is refused without a reply), the identity is
 *   persisted (SuspensionStore.ts), the connection's background work (receipt sends and waiters) drains for up
 *   to 5 s, `accepted: true` is sent within the 5 s send budget, and the connection is closed (1000,
 *   "suspended").
 *
 * A connection that starts while the persisted state is suspended is fenced: its first frame must be an
 * `environment_resume` naming the same Environment and suspend id, which persists the resume, answers
 * `accepted: true` and reopens admission. Any other first frame is refused and closes the connection; a resume
 * with other identities is answered `invalid_request` and closes it; no resume within 30 s of the connection
 * closes it too (each reconnect attempt is bounded at 30 s). The daemon loop then reconnects and the fence holds.
 *
 * Resume on an open connection: `accepted: true` when it repeats the last accepted resume, or carries
 * `rollback: true` (a no-op resume of the still-running source after an uncertain quiesce; it never authorizes
 * anything else); `invalid_request` for another Environment; otherwise `not_suspended`.
 *
 * A malformed quiesce or resume whose id is known is answered `accepted: false, invalid_request` with empty
 * identities (the payload is never echoed). Decisions: docs/wire-decisions.md "Suspension".
 */
import { Context, Deferred, Duration, Effect, FiberSet, Layer, Option } from "effect"
import { CloseNormal, StatusSendBudget } from "../proto/Limits.js"
import type { Messages } from "../proto/index.js"
import type { SuspensionErrorCode } from "../proto/ErrorCodes.js"
import type { SuspensionRequestPayload } from "../proto/Suspension.js"
import { Admission } from "./Admission.js"
import { Background, Drain, WorkspaceGate } from "./ConnectionServices.js"
import { Executors } from "./Executors.js"
import { Interactions } from "./Interactions.js"
import { Outbound, withTrace } from "./Outbound.js"
import { Runs } from "./Runs.js"
import { StatusBoard } from "./StatusBoard.js"
import { Transfer } from "./transfer/Transfer.js"
import { type SuspensionIdentity, SuspensionStore } from "./SuspensionStore.js"
import { Transport } from "./transport/Transport.js"
import type { Inbound } from "./transport/Transport.js"
import { EnvironmentBinding } from "./workspace/EnvironmentBinding.js"
import { Workspace } from "./workspace/Workspace.js"

/** The Runtime drains for up to this long before it answers an accepted quiesce. */
export const QuiesceDrain: Duration.Duration = Duration.seconds(5)
/** A suspended daemon's connection waits this long for the resume before it closes (one reconnect attempt). */
export const ResumeWait: Duration.Duration = Duration.seconds(30)

/** Admission state of this connection. */
export type Fence =
  | { readonly _tag: "Open" }
  /** Connected while suspended: the first frame must be the matching resume. */
  | { readonly _tag: "AwaitingResume"; readonly identity: SuspensionIdentity }
  /** A quiesce was accepted: draining, then the reply and the close. */
  | { readonly _tag: "Quiescing"; readonly identity: SuspensionIdentity }
  /** The connection is being closed by the fence; nothing is admitted any more. */
  | { readonly _tag: "Closed" }

/** Terminal admission states (the view's `finished` is a started admission whose Run ended). */
const settledAdmission = new Set(["released", "expired", "failed", "rejected", "finished"])

export interface SuspensionShape {
  /**
   * Called for every inbound item before routing: true when it may be routed as usual. While fenced, handles
   * the item itself (the resume, or the refusal) and returns false.
   */
  readonly admit: (item: Inbound) => Effect.Effect<boolean>
  readonly quiesce: (message: Messages.MessageOfType<"environment_quiesce">) => Effect.Effect<void>
  readonly resume: (message: Messages.MessageOfType<"environment_resume">) => Effect.Effect<void>
  /** The answer to a malformed quiesce or resume whose id is known. */
  readonly rejectInvalid: (type: "environment_quiesce" | "environment_resume", id: string) => Effect.Effect<void>
  /** What is unsettled right now (empty: a quiesce would be accepted). */
  readonly unsettled: Effect.Effect<ReadonlyArray<string>>
  readonly fence: Effect.Effect<Fence>
}

const sameIdentity = (a: SuspensionIdentity | null, b: SuspensionIdentity): boolean =>
  a !== null && a.environment_id === b.environment_id && a.suspend_id === b.suspend_id

const make = Effect.gen(function* () {
  const outbound = yield* Outbound
  const transport = yield* Transport
  const background = yield* Background
  const drain = yield* Drain
  const gate = yield* WorkspaceGate
  const runs = yield* Runs
  const admission = yield* Admission
  const interactions = yield* Interactions
  const workspace = yield* Workspace
  const executors = yield* Executors
  const transfer = yield* Transfer
  const store = yield* SuspensionStore
  const binding = (yield* EnvironmentBinding).binding
  // Fibers of this family: outside `background`, which the quiesce drain waits on.
  const own = yield* FiberSet.make<unknown, unknown>()
  const forkOwn = <A>(effect: Effect.Effect<A>) => FiberSet.run(own, effect).pipe(Effect.asVoid)

  const board = yield* StatusBoard
  const persisted = yield* store.current
  let fence: Fence = persisted.suspended === null ? { _tag: "Open" } : { _tag: "AwaitingResume", identity: persisted.suspended }
  /** Publishes the fence on the status board (`agentwire status`): open, quiescing, or suspended with its identity. */
  const publish = (state: "open" | "quiescing" | "suspended", identity?: SuspensionIdentity) =>
    board.setSuspension(identity === undefined ? { state } : { state, ...identity })
  const resumeSettled = yield* Deferred.make<void>()

  type ReplyType = "environment_quiesced" | "environment_resumed"
  const replyOf = (
    type: ReplyType,
    id: string,
    identity: SuspensionIdentity,
    code: SuspensionErrorCode | undefined,
    trace: string | undefined
  ): Messages.RuntimeToCore =>
    withTrace({
      type,
      id,
      payload: { ...identity, accepted: code === undefined, ...(code === undefined ? {} : { error_code: code }) }
    } as Messages.RuntimeToCore, trace)
  const send = (message: Messages.RuntimeToCore) => outbound.sendWithin(message, StatusSendBudget)
  const close = (reason: string) =>
    Effect.gen(function* () {
      fence = { _tag: "Closed" }
      yield* Effect.logInfo("closing the connection: suspension fence").pipe(Effect.annotateLogs({ reason }))
      yield* transport.close(CloseNormal, reason)
    })
  const identityOf = (p: SuspensionRequestPayload): SuspensionIdentity => ({ environment_id: p.environment_id, suspend_id: p.suspend_id })
  const boundTo = (p: SuspensionRequestPayload) => Option.isSome(binding) && binding.value.environmentId === p.environment_id

  const unsettled = Effect.gen(function* () {
    const reasons: Array<string> = []
    if (yield* drain.draining) reasons.push("shutdown")
    if (yield* transfer.active) reasons.push("runtime_preparation")
    if ((yield* runs.activeCount) > 0) reasons.push("runs")
    if ((yield* workspace.activeReads) > 0) reasons.push("reads")
    if (yield* gate.busy) reasons.push("write_or_export")
    if ((yield* interactions.pendingCount) > 0) reasons.push("interactions")
    if ((yield* admission.view).some((a) => !settledAdmission.has(a.state))) reasons.push("preparations")
    const bound = Option.isSome(binding) ? binding.value.environmentId : undefined
    for (const e of yield* executors.entries) {
      if (e.state !== "idle" || e.closing) {
        if (!reasons.includes("executors")) reasons.push("executors")
      } else if (e.environmentId !== bound && !reasons.includes("idle_other_environment")) {
        reasons.push("idle_other_environment")
      }
    }
    return reasons
  })

  const quiesce = (m: Messages.MessageOfType<"environment_quiesce">) =>
    Effect.gen(function* () {
      const identity = identityOf(m.payload)
      const refuse = (code: SuspensionErrorCode) => forkOwn(send(replyOf("environment_quiesced", m.id, identity, code, m.trace)))
      if (!boundTo(m.payload) || m.payload.rollback === true) return yield* refuse("invalid_request")
      const busy = yield* unsettled
      if (busy.length > 0) {
        yield* Effect.logInfo("environment_quiesce refused: work unsettled").pipe(Effect.annotateLogs({ unsettled: busy.join(",") }))
        return yield* refuse("resource_busy")
      }
      // The fence closes before anything else can be received: nothing new is admitted from here on.
      fence = { _tag: "Quiescing", identity }
      const state = yield* store.current
      const saved = yield* Effect.result(store.set({ ...state, suspended: identity }))
      if (saved._tag === "Failure") {
        fence = { _tag: "Open" }
        yield* Effect.logError(saved.failure.message)
        return yield* refuse("resource_busy")
      }
      yield* publish("quiescing", identity)
      yield* forkOwn(Effect.gen(function* () {
        const drained = yield* FiberSet.awaitEmpty(background).pipe(
          Effect.timeoutOrElse({ duration: QuiesceDrain, orElse: () => Effect.succeed("timeout" as const) })
        )
        if (drained === "timeout") yield* Effect.logWarning("quiesce drain reached its 5 s bound; answering")
        yield* send(replyOf("environment_quiesced", m.id, identity, undefined, m.trace))
        yield* publish("suspended", identity)
        yield* close("suspended")
      }))
    }).pipe(Effect.annotateLogs({ suspend_id_bytes: m.payload.suspend_id.length }))

  /** A resume on an open connection. */
  const resume = (m: Messages.MessageOfType<"environment_resume">) =>
    Effect.gen(function* () {
      const identity = identityOf(m.payload)
      const state = yield* store.current
      const code: SuspensionErrorCode | undefined = !boundTo(m.payload)
        ? "invalid_request"
        : sameIdentity(state.last_resume, identity) || m.payload.rollback === true
        ? undefined
        : "not_suspended"
      yield* forkOwn(send(replyOf("environment_resumed", m.id, identity, code, m.trace)))
    })

  /** The first frame of a fenced connection. */
  const fencedFirst = (item: Inbound, expected: SuspensionIdentity) =>
    Effect.gen(function* () {
      yield* Deferred.succeed(resumeSettled, undefined)
      if (item._tag !== "Message" || item.message.type !== "environment_resume") {
        yield* Effect.logWarning("frame refused: suspended, the first frame must be environment_resume").pipe(
          Effect.annotateLogs({ type: item._tag === "Message" ? item.message.type : item.error.type ?? "" })
        )
        return yield* close("resume_required")
      }
      const m = item.message
      const identity = identityOf(m.payload)
      if (!sameIdentity(expected, identity)) {
        fence = { _tag: "Closed" }
        return yield* forkOwn(Effect.andThen(
          send(replyOf("environment_resumed", m.id, identity, "invalid_request", m.trace)),
          close("resume_mismatch")
        ))
      }
      const state = yield* store.current
      const saved = yield* Effect.result(store.set({ ...state, suspended: null, last_resume: identity }))
      if (saved._tag === "Failure") {
        yield* Effect.logError(saved.failure.message)
        fence = { _tag: "Closed" }
        return yield* forkOwn(Effect.andThen(
          send(replyOf("environment_resumed", m.id, identity, "resource_busy", m.trace)),
          close("resume_not_persisted")
        ))
      }
      fence = { _tag: "Open" }
      yield* publish("open")
      yield* Effect.logInfo("environment resumed; admission reopened")
      yield* forkOwn(send(replyOf("environment_resumed", m.id, identity, undefined, m.trace)))
    })

  if (fence._tag === "AwaitingResume") {
    yield* publish("suspended", fence.identity)
    yield* Effect.logInfo("suspended: waiting for environment_resume as the first frame")
    yield* forkOwn(Effect.gen(function* () {
      const arrived = yield* Deferred.await(resumeSettled).pipe(
        Effect.timeoutOrElse({ duration: ResumeWait, orElse: () => Effect.succeed("timeout" as const) })
      )
      if (arrived === "timeout" && fence._tag === "AwaitingResume") yield* close("resume_timeout")
    }))
  }

  return Suspension.of({
    admit: (item) =>
      Effect.suspend(() => {
        const f = fence
        switch (f._tag) {
          case "Open":
            return Effect.succeed(true)
          case "AwaitingResume":
            return Effect.as(fencedFirst(item, f.identity), false)
          case "Quiescing":
          case "Closed":
            return Effect.as(
              Effect.logInfo("frame refused: suspension fence").pipe(Effect.annotateLogs({
                type: item._tag === "Message" ? item.message.type : item.error.type ?? "",
                fence: f._tag
              })),
              false
            )
        }
      }),
    quiesce,
    resume,
    rejectInvalid: (type, id) =>
      forkOwn(send(replyOf(
        type === "environment_quiesce" ? "environment_quiesced" : "environment_resumed",
        id,
        { environment_id: "", suspend_id: "" },
        "invalid_request",
        undefined
      ))),
    unsettled,
    fence: Effect.sync(() => fence)
  })
})

/** The connection's suspension family and fence. */
export class Suspension extends Context.Service<Suspension, SuspensionShape>()("agentwire/runtime/Suspension") {
  static readonly layer = Layer.effect(Suspension, make)
}
