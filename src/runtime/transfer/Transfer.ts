/**
 * `runtime_prepare` (reference part 2 §6), Runtime side: Environment initialization and capability transfer, one
 * transfer per connection, as a connection service (built fresh in `ConnectionLayer`; nothing is replayed on a
 * later connection). Envelope.id is the transfer id.
 *
 * - A frame that fails the shared validator (`validateRequest`) is `rejected` / `invalid_request`; for the active
 *   transfer it also ends it (nothing is installed).
 * - `begin`: a duplicate of the active id gets no reply; another active transfer is `runtime_preparation_capacity`.
 *   An encoded begin over 1 MiB is `invalid_request`. An unbound daemon, another Environment, device shutdown, or
 *   anything live (a workspace write, export or read, a Run, an Executor active or idle, a workspace mutation) is
 *   `resource_unavailable`. A skill name outside the grammar, an archive declared over 5 MiB, a network request the
 *   binding does not allow, or a skill, plugin or finalize after `finalize` is `runtime_preparation_rejected`.
 *   Otherwise the staging area is created (Steps.ts) and `ready` sent; the 120 s budget starts. While a transfer
 *   is active, `WorkspaceGate` refuses new work (preparations, direct Runs, workspace writes).
 * - `chunk` (file, skill, plugin only): at exactly the bytes received so far, 1..64 KiB, within the declared size;
 *   staged, then `received` with the new total, then hashed (the digest is only read at commit). Anything else ends the transfer with `invalid_request`.
 * - `commit`: a short body or a digest mismatch is `invalid_request` (the installer never runs); otherwise the
 *   action runs (Steps.ts) within what is left of the budget: `completed`, `rejected` (nothing changed),
 *   `failed` (with `exit_code` for a command) or `unknown` / `runtime_preparation_unconfirmed` when the
 *   installation may have happened but is not proven. An unknown effect is never reported as a rejection.
 * - The budget expiring before commit ends the transfer with `invalid_request`.
 *
 * The staging area is a scoped resource of the transfer (resource `transfer:<id>`, kind `transfer`), removed
 * through `closeUntilConfirmed` when the transfer ends in any way (success, refusal, interruption, connection
 * loss). Every reply has the 5 s send budget.
 */
import { createHash } from "node:crypto"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import type { TransferId } from "../../proto/Ids.js"
import { StatusSendBudget, TransferBudget } from "../../proto/Limits.js"
import { type RuntimePreparePayload, type RuntimePrepareResultPayload, validateRequest } from "../../proto/RuntimePrepare.js"
import { checkChunk, checkCommit } from "../../proto/Transfer.js"
import { chunkBytes } from "../transport/ChunkData.js"
import { MaxTransferBytes } from "../../proto/Limits.js"
import { Background, Drain, WorkspaceGate } from "../ConnectionServices.js"
import { Executors } from "../Executors.js"
import { Outbound, withTrace } from "../Outbound.js"
import { closeUntilConfirmed, observed, Ownership } from "../Ownership.js"
import { RuntimePolicy } from "../RuntimePolicy.js"
import { Runs } from "../Runs.js"
import { StatusBoard } from "../StatusBoard.js"
import { EnvironmentBinding } from "../workspace/EnvironmentBinding.js"
import { Workspace } from "../workspace/Workspace.js"
import { WorkspaceFs } from "../workspace/WorkspaceFs.js"
import { beginRefusal, type Body, carriesBytes, commitAction, openBody } from "./Steps.js"
import { TransferSettings } from "./TransferSettings.js"
import * as SerialWorker from "../workspace/internal/serialWorker.js"

/** How long a transfer's end waits for its staging removal before replying anyway. */
const StagingRemovalWait = Duration.seconds(1)
/** The encoded begin payload bound. */
const MaxBeginBytes = 1024 * 1024

type Result = RuntimePrepareResultPayload

interface ActiveTransfer {
  readonly id: TransferId
  readonly header: RuntimePreparePayload
  readonly trace: string | undefined
  readonly scope: Scope.Closeable
  readonly hash: ReturnType<typeof createHash>
  readonly leave: Effect.Effect<void>
  readonly deadline: number
  body: Body | undefined
  received: number
  ended: boolean
  timer: Fiber.Fiber<void> | undefined
}

export interface TransferShape {
  /**
   * Handles one `runtime_prepare` frame; returns at once. The active transfer's steps (staging, each chunk,
   * commit, its end) run one at a time on the service's worker fiber; other replies in connection fibers.
   */
  readonly handle: (id: TransferId, payload: RuntimePreparePayload, trace: string | undefined) => Effect.Effect<void>
  /** True while a transfer is received, installed or its staging area removed. */
  readonly active: Effect.Effect<boolean>
}

const invalid: Result = { outcome: "rejected", error_code: "invalid_request" }

const makeTransfer = Effect.gen(function* () {
  const outbound = yield* Outbound
  const background = yield* Background
  const drain = yield* Drain
  const gate = yield* WorkspaceGate
  const runs = yield* Runs
  const executors = yield* Executors
  const workspace = yield* Workspace
  const binding = (yield* EnvironmentBinding).binding
  const settings = yield* TransferSettings
  const fs = yield* WorkspaceFs
  const ownership = observed(yield* Ownership, (yield* StatusBoard).touch)
  const policy = yield* RuntimePolicy
  const parent = yield* Effect.scope
  const worker = yield* SerialWorker.make("runtime_prepare")
  let current: ActiveTransfer | undefined
  /** This connection's `configure` environment and whether `finalize` froze the capability sources. */
  const configured = new Map<string, string>()
  let finalized = false

  const send = (id: TransferId, payload: Result, trace: string | undefined) =>
    outbound.sendWithin(withTrace({ type: "runtime_prepare_result", id, payload }, trace), StatusSendBudget)
  const reply = (id: TransferId, payload: Result, trace: string | undefined) => Background.fork(background, send(id, payload, trace))

  /**
   * Ends the transfer: the staging area is removed (confirmed) and the gate left before the reply, so Core may
   * begin the next transfer or work once it has the receipt. A removal still unconfirmed after 1 s does not hold
   * the reply back: the transfer keeps its slot (and ownership) until the removal is confirmed.
   */
  const finish = (t: ActiveTransfer, payload: Result, fromTimer = false) =>
    Effect.gen(function* () {
      if (t.ended) return
      t.ended = true
      if (t.timer !== undefined && !fromTimer) yield* Fiber.interrupt(t.timer)
      const release = Scope.close(t.scope, Exit.void).pipe(
        Effect.andThen(t.leave),
        Effect.andThen(Effect.sync(() => {
          if (current === t) current = undefined
        }))
      )
      const releasing = yield* Effect.forkIn(release, parent)
      yield* Fiber.await(releasing).pipe(Effect.timeoutOrElse({ duration: StagingRemovalWait, orElse: () => Effect.void }))
      yield* send(t.id, payload, t.trace)
    })

  /** Creates the staging area (owned by the transfer's scope until its removal is confirmed); then `ready`. */
  const open = (t: ActiveTransfer) =>
    Effect.gen(function* () {
      if (carriesBytes(t.header)) {
        const root = Option.getOrThrow(binding).root
        const tag = createHash("sha256").update(t.id).digest("hex").slice(0, 16)
        const opened = yield* openBody(fs, root, t.header, tag)
        if (opened._tag === "Failure") return yield* finish(t, opened.failure)
        const body = opened.success
        t.body = body
        const resource = `transfer:${t.id}`
        yield* ownership.acquire(resource, "transfer")
        yield* Scope.addFinalizer(
          t.scope,
          closeUntilConfirmed(resource, Effect.mapError(body.discard, () => "io"), (r) => `staging removal failed: ${r}`).pipe(
            Effect.provideService(Ownership, ownership),
            Effect.provideService(RuntimePolicy, policy)
          )
        )
      }
      yield* send(t.id, { outcome: "ready" }, t.trace)
      // In the connection's fibers (not the transfer's scope, which `finish` closes).
      t.timer = yield* Effect.sleep(TransferBudget).pipe(
        Effect.andThen(Effect.suspend(() => (t.ended ? Effect.void : worker.submit(finish(t, invalid, true))))),
        Effect.forkIn(parent)
      )
    })

  const live = Effect.gen(function* () {
    const counts = yield* executors.counts
    return (yield* drain.draining) || (yield* gate.busy) || (yield* runs.activeCount) > 0 || counts.active + counts.idle > 0 ||
      (yield* workspace.busy)
  })

  const begin = (id: TransferId, p: RuntimePreparePayload, trace: string | undefined) =>
    Effect.gen(function* () {
      if (current !== undefined) {
        if (current.id === id) return yield* Effect.logWarning("duplicate runtime_prepare begin ignored").pipe(Effect.annotateLogs({ transfer_id: id }))
        return yield* reply(id, { outcome: "rejected", error_code: "runtime_preparation_capacity" }, trace)
      }
      if (Buffer.byteLength(JSON.stringify(p)) > MaxBeginBytes) return yield* reply(id, invalid, trace)
      if (Option.isNone(binding) || p.environment_id !== binding.value.environmentId || (yield* live)) {
        return yield* reply(id, { outcome: "rejected", error_code: "resource_unavailable" }, trace)
      }
      const refusal = beginRefusal(p, binding.value, finalized)
      if (refusal !== undefined) return yield* reply(id, refusal, trace)
      const now = yield* Clock.currentTimeMillis
      const t: ActiveTransfer = {
        id,
        header: p,
        trace,
        scope: yield* Scope.fork(parent, "sequential"),
        hash: createHash("sha256"),
        leave: yield* gate.enter,
        deadline: now + Duration.toMillis(TransferBudget),
        body: undefined,
        received: 0,
        ended: false,
        timer: undefined
      }
      current = t
      yield* worker.submit(open(t))
    })

  const chunk = (t: ActiveTransfer, p: RuntimePreparePayload) =>
    Effect.gen(function* () {
      if (t.ended) return
      const body = t.body
      const bytes = chunkBytes(p)
      if (body === undefined || bytes === undefined || bytes._tag === "Failure") return yield* finish(t, invalid)
      const data = bytes.success
      const total = checkChunk(
        { received: t.received, declaredSize: t.header.size_bytes ?? 0, maxTotal: MaxTransferBytes },
        { offset: p.offset ?? 0, length: data.length }
      )
      if (total._tag === "Failure") return yield* finish(t, invalid)
      const written = yield* body.write(data, t.received).pipe(Effect.result)
      if (written._tag === "Failure") return yield* finish(t, { outcome: "rejected", error_code: "runtime_preparation_rejected" })
      t.received = total.success
      // Handed over without waiting for the write (`Outbound.post`): the next chunk's step need not wait for it.
      yield* outbound.post(withTrace({ type: "runtime_prepare_result", id: t.id, payload: { outcome: "received", offset: t.received } }, t.trace))
      // The digest is needed only at commit (a later step of this worker) and its update cannot fail: hashing after
      // the receipt is handed over takes it off the chunk's round trip (SHA-256 of 64 KiB, about 35 µs), while Core
      // reads the receipt and sends the next chunk.
      t.hash.update(data)
    })

  const commit = (t: ActiveTransfer) =>
    Effect.gen(function* () {
      if (t.ended) return
      if (carriesBytes(t.header)) {
        const issue = checkCommit(
          { received: t.received, declaredSize: t.header.size_bytes ?? 0, declaredSha256: t.header.sha256 ?? "" },
          t.hash.copy().digest("hex")
        )
        if (t.body === undefined || Option.isSome(issue)) return yield* finish(t, invalid)
      }
      const left = Math.max(0, t.deadline - (yield* Clock.currentTimeMillis))
      const result = yield* commitAction(t.header, {
        binding: Option.getOrThrow(binding),
        body: t.body,
        configured,
        childEnv: settings.childEnv
      }).pipe(
        Effect.timeoutOption(Duration.millis(left)),
        Effect.map(Option.getOrElse((): Result => ({ outcome: "failed", error_code: "runtime_preparation_failed" })))
      )
      if (t.header.action === "finalize" && result.outcome === "completed") finalized = true
      yield* finish(t, result)
    })

  const handle = (id: TransferId, p: RuntimePreparePayload, trace: string | undefined) =>
    Effect.gen(function* () {
      const t = current !== undefined && current.id === id ? current : undefined
      if (Option.isSome(validateRequest(p))) {
        if (t !== undefined) return yield* worker.submit(finish(t, invalid))
        return yield* reply(id, invalid, trace)
      }
      if (p.step === "begin") return yield* begin(id, p, trace)
      if (t === undefined) return yield* reply(id, invalid, trace)
      yield* worker.submit(p.step === "chunk" ? chunk(t, p) : commit(t))
    })

  return Transfer.of({ handle, active: Effect.sync(() => current !== undefined) })
})

/** The `runtime_prepare` family of one connection. */
export class Transfer extends Context.Service<Transfer, TransferShape>()("agentwire/runtime/Transfer") {
  static readonly layer = Layer.effect(Transfer, makeTransfer)
}
