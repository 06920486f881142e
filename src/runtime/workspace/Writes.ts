/**
 * `workspace_write` (reference part 2 §7.4), Runtime side: a complete bounded body in acknowledged chunks,
 * verified and installed atomically; one write per connection; execution excluded while it is received or
 * applied (`WorkspaceGate`).
 *
 * - `begin`: a duplicate of the active id gets no reply; another active write is `write_capacity`; an unbound
 *   daemon, another Environment, device shutdown, an export, any Run, Executor (active or idle), or pending read
 *   is `resource_unavailable`. Then the staging file is created beside the destination (parents created, each
 *   verified inside the root); a destination that is a directory (or below a file) is `write_rejected` /
 *   `destination_directory`, a symlink, special file or escaping path `write_rejected` / `unsafe_destination`.
 *   Otherwise `ready`; the 120 s budget starts.
 * - `chunk`: at exactly the bytes received so far, 1..64 KiB, within the declared size; written at its offset
 *   and hashed; `received` with the new total. A wrong offset, bad data or an oversize chunk is `rejected` /
 *   `invalid_request` and ends the write (the staging file is removed; the destination is untouched).
 * - `commit`: a short body or a digest mismatch is `invalid_request` (the installer never runs); otherwise the
 *   staging file is fsynced, renamed over the destination and the directory fsynced: `completed` with the size.
 *   A failure before the rename is `write_rejected` (the old file is intact); after it, `unknown` /
 *   `write_unconfirmed` (the rename happened, durability is not proven).
 * - The budget expiring ends the write with `rejected` / `invalid_request`. A frame for an unknown id is
 *   `invalid_request`; nothing is ever replayed.
 *
 * The staging file is a scoped resource (resource `write:<id>`, kind `workspace`): removed when the write ends in
 * any way (including interruption and connection loss) through `closeUntilConfirmed`. Every filesystem call
 * (staging, chunk writes, fsync, rename, directory fsync, staging removal) goes through `WorkspaceFs`, so tests
 * can inject faults at each step.
 */
import { createHash, type Hash } from "node:crypto"
import { Duration, Effect, Exit, Fiber, Option, Scope } from "effect"
import type { WriteErrorCode } from "../../proto/ErrorCodes.js"
import type { OperationId } from "../../proto/Ids.js"
import { MaxChunkBytes, StatusSendBudget, TransferBudget } from "../../proto/Limits.js"
import { echo } from "../../proto/Trace.js"
import { chunkBytes } from "../transport/ChunkData.js"
import { validateWriteRequest, type WorkspaceWritePayload, type WorkspaceWriteResultPayload } from "../../proto/Workspace.js"
import { Background, Drain, WorkspaceGate } from "../ConnectionServices.js"
import { Executors } from "../Executors.js"
import { Outbound, withTrace } from "../Outbound.js"
import { closeUntilConfirmed, observed, Ownership } from "../Ownership.js"
import { RuntimePolicy } from "../RuntimePolicy.js"
import { Runs } from "../Runs.js"
import { StatusBoard } from "../StatusBoard.js"
import { EnvironmentBinding } from "./EnvironmentBinding.js"
import * as SerialWorker from "./internal/serialWorker.js"
import { installStaging, type NativeStaging, type StagingFailure, WorkspaceFs } from "./WorkspaceFs.js"

/** How long a write's end waits for its staging removal before replying anyway. */
const StagingRemovalWait = Duration.seconds(1)

interface ActiveWrite {
  readonly id: OperationId
  readonly size: number
  readonly sha256: string
  readonly trace: string | undefined
  /** The trace every reply carries (`Trace.echo` of `trace`), checked once at begin instead of once per chunk. */
  readonly echoed: string | undefined
  readonly scope: Scope.Closeable
  readonly hash: Hash
  readonly leave: Effect.Effect<void>
  staging: NativeStaging | undefined
  received: number
  ended: boolean
  timer: Fiber.Fiber<void> | undefined
}

export const makeWrites = (activeReads: Effect.Effect<number>, exportActive: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const outbound = yield* Outbound
    const background = yield* Background
    const drain = yield* Drain
    const gate = yield* WorkspaceGate
    const runs = yield* Runs
    const executors = yield* Executors
    const binding = (yield* EnvironmentBinding).binding
    const fs = yield* WorkspaceFs
    const ownership = observed(yield* Ownership, (yield* StatusBoard).touch)
    const policy = yield* RuntimePolicy
    const parent = yield* Effect.scope
    const worker = yield* SerialWorker.make("workspace_write")
    let current: ActiveWrite | undefined

    const send = (id: OperationId, payload: WorkspaceWriteResultPayload, trace: string | undefined) =>
      outbound.sendWithin(withTrace({ type: "workspace_write_result", id, payload }, trace), StatusSendBudget)
    const reject = (id: OperationId, code: WriteErrorCode, trace: string | undefined, reason?: "destination_directory" | "unsafe_destination") =>
      Background.fork(background, send(id, { outcome: "rejected", error_code: code, ...(reason === undefined ? {} : { reason }) }, trace))

    /**
     * Ends the write: the staging file is removed (confirmed) and the gate left before the reply, so Core may begin
     * the next write or execution as soon as it has the receipt. A removal still unconfirmed after 1 s does not
     * hold the reply back: the write keeps its capacity (and ownership) until the removal is confirmed.
     */
    const finish = (w: ActiveWrite, payload: WorkspaceWriteResultPayload, fromTimer = false) =>
      Effect.gen(function* () {
        if (w.ended) return
        w.ended = true
        if (w.timer !== undefined && !fromTimer) yield* Fiber.interrupt(w.timer)
        const release = Scope.close(w.scope, Exit.void).pipe(
          Effect.andThen(w.leave),
          Effect.andThen(Effect.sync(() => {
            if (current === w) current = undefined
          }))
        )
        const releasing = yield* Effect.forkIn(release, parent)
        yield* Fiber.await(releasing).pipe(Effect.timeoutOrElse({ duration: StagingRemovalWait, orElse: () => Effect.void }))
        yield* send(w.id, payload, w.trace)
      })

    const invalid: WorkspaceWriteResultPayload = { outcome: "rejected", error_code: "invalid_request" }

    /** Creates the staging file (owned by the write's scope until its removal is confirmed); then `ready`. */
    const open = (w: ActiveWrite, path: string) =>
      Effect.gen(function* () {
        const tempName = `.agentwire-write-${createHash("sha256").update(w.id).digest("hex").slice(0, 16)}.tmp`
        const created = yield* fs.openStaging(path, tempName).pipe(Effect.result)
        if (created._tag === "Failure") {
          const f = created.failure
          return yield* finish(w, f === "destination_directory" || f === "unsafe_destination"
            ? { outcome: "rejected", error_code: "write_rejected", reason: f }
            : f === "invalid_path" ? invalid : { outcome: "rejected", error_code: "write_rejected" })
        }
        const staging = created.success
        w.staging = staging
        const resource = `write:${w.id}`
        yield* ownership.acquire(resource, "workspace")
        yield* Scope.addFinalizer(
          w.scope,
          closeUntilConfirmed(resource, staging.discard, (r) => `staging removal failed: ${r}`).pipe(
            Effect.provideService(Ownership, ownership),
            Effect.provideService(RuntimePolicy, policy)
          )
        )
        yield* send(w.id, { outcome: "ready" }, w.trace)
        // In the connection's fibers (not the write's scope, which `finish` closes).
        w.timer = yield* Effect.sleep(TransferBudget).pipe(
          Effect.andThen(Effect.suspend(() => (w.ended ? Effect.void : worker.submit(finish(w, invalid, true))))),
          Effect.forkIn(parent)
        )
      })

    const begin = (id: OperationId, p: WorkspaceWritePayload, trace: string | undefined) =>
      Effect.gen(function* () {
        if (current !== undefined) {
          if (current.id === id) return yield* Effect.logWarning("duplicate workspace_write begin ignored").pipe(Effect.annotateLogs({ operation_id: id }))
          return yield* reject(id, "write_capacity", trace)
        }
        const counts = yield* executors.counts
        const busy = Option.isNone(binding) || p.environment_id !== binding.value.environmentId || (yield* drain.draining) ||
          (yield* gate.busy) || (yield* runs.activeCount) > 0 || counts.active + counts.idle > 0 || (yield* activeReads) > 0 ||
          (yield* exportActive)
        if (busy) return yield* reject(id, "resource_unavailable", trace)
        const w: ActiveWrite = {
          id,
          size: p.size_bytes ?? 0,
          sha256: p.sha256 ?? "",
          trace,
          echoed: echo(trace),
          scope: yield* Scope.fork(parent, "sequential"),
          hash: createHash("sha256"),
          leave: yield* gate.enter,
          staging: undefined,
          received: 0,
          ended: false,
          timer: undefined
        }
        current = w
        yield* worker.submit(open(w, p.path ?? ""))
      })

    /**
     * One chunk: checked, written at its offset, hashed, then its `received` receipt posted. A plain effect (no
     * generator, no `Result` wrapper): it runs once per 64 KiB, so its per-step allocations are part of the
     * per-byte cost (`docs/performance.md` "Workspace").
     */
    const chunk = (w: ActiveWrite, p: WorkspaceWritePayload): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (w.ended) return Effect.void
        const staging = w.staging
        const bytes = chunkBytes(p)
        if (
          staging === undefined || (p.offset ?? 0) !== w.received || bytes === undefined || bytes._tag === "Failure" ||
          bytes.success.length < 1 || bytes.success.length > MaxChunkBytes || w.received + bytes.success.length > w.size
        ) return finish(w, invalid)
        const data = bytes.success
        return Effect.matchEffect(staging.write(data, w.received), {
          onFailure: () => finish(w, { outcome: "rejected", error_code: "write_rejected" }),
          onSuccess: () => {
            w.hash.update(data)
            w.received += data.length
            const payload: WorkspaceWriteResultPayload = { outcome: "received", offset: w.received }
            // Handed over without waiting for the write (`Outbound.post`): the next chunk's step need not wait for it.
            return outbound.post(
              w.echoed === undefined
                ? { type: "workspace_write_result", id: w.id, payload }
                : { type: "workspace_write_result", id: w.id, payload, trace: w.echoed }
            )
          }
        })
      })

    const commit = (w: ActiveWrite) =>
      Effect.gen(function* () {
        if (w.ended) return
        const staging = w.staging
        if (staging === undefined || w.received !== w.size || w.hash.copy().digest("hex") !== w.sha256) return yield* finish(w, invalid)
        // Before the rename the old file is intact (`write_rejected`); after it only durability is unproven.
        const rejected = (f: StagingFailure): WorkspaceWriteResultPayload => ({
          outcome: "rejected",
          error_code: "write_rejected",
          ...(f === "destination_directory" || f === "unsafe_destination" ? { reason: f } : {})
        })
        const installed = yield* installStaging(staging).pipe(Effect.result)
        if (installed._tag === "Failure") return yield* finish(w, rejected(installed.failure))
        if (installed.success === "unconfirmed") return yield* finish(w, { outcome: "unknown", error_code: "write_unconfirmed" })
        yield* finish(w, { outcome: "completed", size_bytes: w.size })
      })

    const write = (id: OperationId, p: WorkspaceWritePayload, trace: string | undefined): Effect.Effect<void> =>
      Effect.suspend(() => {
        const w = current !== undefined && current.id === id ? current : undefined
        if (Option.isSome(validateWriteRequest(p))) {
          // A malformed frame for the admitted id gets no reply (reference §7.4).
          if (w !== undefined) return Effect.logWarning("malformed workspace_write frame ignored").pipe(Effect.annotateLogs({ operation_id: id }))
          return reject(id, "invalid_request", trace)
        }
        if (p.step === "begin") return begin(id, p, trace)
        if (w === undefined) return reject(id, "invalid_request", trace)
        return worker.submit(p.step === "chunk" ? chunk(w, p) : commit(w))
      })

    return {
      write,
      /** True while a write is received, applied or its staging file removed. */
      active: Effect.sync(() => current !== undefined)
    }
  })
