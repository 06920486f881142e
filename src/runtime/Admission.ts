/**
 * Execution admission, Runtime side (protocol "Preparation and execution order", reference part 1 §6):
 * `execution_prepare`, `execution_start`, `execution_release` and the `preparation_status` replies.
 *
 * - Handles are connection-local (from `RuntimeIds`); at most 64 admission records, terminal ones pruned
 *   oldest first; a full table rejects with `preparation_capacity`. An old handle never consumes a
 *   replacement's admission: a start or release must name the handle of its own request id.
 * - Duplicates: the same request id with the same canonical payload (SHA-256 of `Canonical.canonicalJson`)
 *   re-publishes the current status; another payload is `request_conflict` (prepare) or `start_conflict`.
 * - Per-handle revisions: every resource status increments the revision by one under the record's lock and
 *   is sent in revision order; a `rejected` reply has revision 0, carries `operation` + `error_code` and never
 *   changes the record.
 * - A fresh request returns `preparing` then `ready` (handle, owning Executor id, `expires_at`); a healthy idle
 *   Executor of the same Session and configuration fingerprint returns `ready` (revision 1, `reused: true`)
 *   without native preparation. Expiry is 5 minutes after the grant, on the Clock, never extended by retries;
 *   an expired executable admission returns its Executor to the idle pool (still owned until closed).
 * - A valid start publishes `starting`, transfers the reservation to the Run exactly once, and `started` once
 *   a Turn exists. A release after that only re-publishes; it never cancels the successor.
 * - `released` / `failed` / `expired` are published only after any close they imply is confirmed; a failing
 *   close is reported at once instead (`closeReported`: `failed` with `…cleanup_unconfirmed`, then `released`).
 * - Read-only preparations (`workspace_read_only`, capability `workspace_read_preparation`) are admitted
 *   without a Harness process and cannot start (`read_only_preparation`).
 *
 * Status sends have a 5 s budget each; a `ready` that cannot be confirmed written fails the admission with
 * `status_delivery_failed` (its reservation is released). Preparation and start run in connection-owned
 * fibers, never in the receive loop.
 */
import { Clock, Context, Deferred, Duration, Effect, FiberMap, FiberSet, Latch, Layer, Option } from "effect"
import type { PreparationErrorCode } from "../proto/ErrorCodes.js"
import {
  requiredCapabilities,
  validatePreparationConfiguration,
  validateReadOnlyConfiguration
} from "../proto/Execution.js"
import * as DueOrder from "../proto/DueOrder.js"
import type { AdmissionHandle, PreparationRequestId } from "../proto/Ids.js"
import { AdmissionExpiry, MaxAdmissionRecords } from "../proto/Limits.js"
import { hasImages, validateInlineImages, validateMessageInput } from "../proto/MessageInput.js"
import type {
  ControlOperation,
  ExecutionPreparePayload,
  ExecutionReleasePayload,
  ExecutionStartPayload
} from "../proto/Preparation.js"
import { type AdmissionRecord, makeRecord, makeRoom, type NewRecord, statusSender, statusState } from "./AdmissionRecord.js"
import { Background, Drain, WorkspaceGate } from "./ConnectionServices.js"
import { Executors } from "./Executors.js"
import { configurationFingerprint, fingerprint } from "./Fingerprint.js"
import { missingCapability } from "./harness/Harness.js"
import { HarnessRegistry } from "./harness/HarnessRegistry.js"
import { Outbound } from "./Outbound.js"
import { Ownership } from "./Ownership.js"
import { RuntimeIds } from "./RuntimeIds.js"
import { Runs } from "./Runs.js"
import { type AdmissionStatus, StatusBoard } from "./StatusBoard.js"
import { bindingRejection, EnvironmentBinding } from "./workspace/EnvironmentBinding.js"

export interface AdmissionShape {
  readonly prepare: (requestId: PreparationRequestId, payload: ExecutionPreparePayload, trace: string | undefined) => Effect.Effect<void>
  readonly start: (requestId: PreparationRequestId, payload: ExecutionStartPayload, trace: string | undefined) => Effect.Effect<void>
  readonly release: (requestId: PreparationRequestId, payload: ExecutionReleasePayload, trace: string | undefined) => Effect.Effect<void>
  /** The documented rejection for a control frame that did not decode (type and id known). */
  readonly rejectInvalid: (operation: ControlOperation, requestId: PreparationRequestId, trace: string | undefined) => Effect.Effect<void>
  /** device_shutdown: stop preparations, drop ready reservations (`failed` / `connection_closed`). */
  readonly shutdown: Effect.Effect<void>
  readonly view: Effect.Effect<ReadonlyArray<typeof AdmissionStatus.Type>>
}

const invalidCode: Record<ControlOperation, PreparationErrorCode> = {
  execution_prepare: "invalid_request",
  execution_start: "invalid_start",
  execution_release: "invalid_release"
}

const makeAdmission = Effect.gen(function* () {
    const outbound = yield* Outbound
    const executors = yield* Executors
    const runs = yield* Runs
    const registry = yield* HarnessRegistry
    const ids = yield* RuntimeIds
    const ownership = yield* Ownership
    const background = yield* Background
    const drain = yield* Drain
    const changed = (yield* StatusBoard).touch
    const binding = (yield* EnvironmentBinding).binding
    const gate = yield* WorkspaceGate
    const records = new Map<PreparationRequestId, AdmissionRecord>()
    /** Preparation fibers, keyed by handle. */
    const preparations = yield* FiberMap.make<AdmissionHandle, void, never>()
    // The ready expiries (all one length) share one timer: no fiber per grant (issue 18). A fired one runs under the
    // record's lock and does nothing unless the record is still ready.
    const runExpiry = yield* FiberSet.runtime(background)<never>()
    const expiries = yield* DueOrder.make<AdmissionRecord>((record) => void runExpiry(locked(record, expire(record))))
    const unexpiring = (record: AdmissionRecord) => Effect.sync(() => expiries.remove(record))

    const fork = <A>(effect: Effect.Effect<A>) => FiberSet.run(background, effect).pipe(Effect.asVoid)

    const { reject, publish, republish } = statusSender(outbound, changed)

    const locked = <A>(record: AdmissionRecord, effect: Effect.Effect<A>) => record.lock.withPermits(1)(effect)

    /** Frees room for one more record: prunes terminal records, oldest first. */
    const roomForRecord: Effect.Effect<boolean> = Effect.suspend(() => {
      const room = makeRoom(records, MaxAdmissionRecords)
      return room === "pruned" ? Effect.as(changed, true) : Effect.succeed(room === "room")
    })

    /**
     * Closes the record's Executor (under its lock): true once confirmed without a failed attempt. Otherwise
     * publishes `failed` / `executor_cleanup_unconfirmed` (`cleanup_unconfirmed` read-only) at once, keeps
     * ownership and capacity while the close is retried, publishes `released` once it confirms, returns false.
     */
    const closeReported = (record: AdmissionRecord) =>
      Effect.gen(function* () {
        if ((yield* executors.closeObserved(record.entry)) === "confirmed") return true
        yield* publish(record, "failed", { error_code: record.readOnly ? "cleanup_unconfirmed" : "executor_cleanup_unconfirmed" })
        yield* fork(Effect.andThen(executors.close(record.entry), locked(record, publish(record, "released"))))
        return false
      })

    /** `ready` with a fresh expiry; an unconfirmed ready fails the admission and releases the reservation. */
    const grant = Effect.fnUntraced(function* (record: AdmissionRecord) {
      record.expiresAt = (yield* Clock.currentTimeMillis) + Duration.toMillis(AdmissionExpiry)
      const outcome = yield* publish(record, "ready")
      if (outcome._tag !== "Sent") {
        if (record.readOnly) yield* executors.close(record.entry)
        else yield* executors.toIdle(record.entry)
        yield* publish(record, "failed", { error_code: "status_delivery_failed" })
        return
      }
      expiries.arm(record, record.expiresAt)
    })

    /** An expired reservation: the Executor goes back to the idle pool (a read-only owner is closed first). */
    const expire = (record: AdmissionRecord) =>
      Effect.gen(function* () {
        if (record.state !== "ready") return
        if (!record.readOnly) yield* executors.toIdle(record.entry)
        if (!record.readOnly || (yield* closeReported(record))) yield* publish(record, "expired")
      })

    const prepareNative = (record: AdmissionRecord, sessionId: ExecutionPreparePayload["session_id"]) =>
      Effect.gen(function* () {
        const harness = record.harness
        if (!record.readOnly && harness !== undefined) {
          // Runs in the Executor's own scope; an interruption here (release, shutdown) leaves whatever the
          // adapter created owned by that scope, which the close below closes.
          const prepared = yield* Effect.result(
            executors.prepare(record.entry, harness, {
              executorId: record.entry.id,
              sessionId,
              configuration: record.configuration,
              declaration: record.snapshot
            })
          )
          if (prepared._tag === "Failure") {
            yield* Effect.logWarning("preparation failed").pipe(Effect.annotateLogs({ handle: record.handle }))
            // A structural "no such native session" from the adapter keeps its code (docs/harness-claude-code.md).
            const code = prepared.failure.code === "history_unavailable" ? "history_unavailable" : "preparation_failed"
            yield* locked(record, Effect.gen(function* () {
              if (record.state !== "preparing") return
              if (yield* closeReported(record)) yield* publish(record, "failed", { error_code: code })
            }))
            return
          }
        }
        yield* locked(record, Effect.gen(function* () {
          if (record.state !== "preparing") return
          yield* executors.setState(record.entry, "admitted")
          yield* grant(record)
        }))
      })

    const prepare = Effect.fnUntraced(function* (requestId: PreparationRequestId, payload: ExecutionPreparePayload, trace: string | undefined) {
      const reply = (code: PreparationErrorCode) => fork(reject("execution_prepare", requestId, code, trace))
      const fp = fingerprint(payload)
      const existing = records.get(requestId)
      if (existing !== undefined) {
        return yield* existing.fingerprint === fp
          ? fork(locked(existing, republish(existing, trace)))
          : reply("request_conflict")
      }
      if ((yield* drain.draining) || (yield* gate.busy)) return yield* reply("resource_unavailable")
      const config = payload.configuration
      const readOnly = config.workspace_read_only === true
      const found = yield* registry.get(config.agent_kind)
      if (Option.isNone(found)) return yield* reply("resource_unavailable")
      const harness = found.value
      const snapshot = harness.declaration
      if (readOnly) {
        if (!snapshot.capabilities.workspace_read_preparation || Option.isSome(validateReadOnlyConfiguration(config))) {
          return yield* reply("unsupported_read_preparation")
        }
      } else {
        if (!snapshot.available) return yield* reply("resource_unavailable")
        if (!snapshot.capabilities.preparation) return yield* reply("unsupported_preparation")
        if (Option.isSome(validatePreparationConfiguration(payload.session_id, config))) return yield* reply("invalid_configuration")
        if (Option.isSome(missingCapability(snapshot, requiredCapabilities(config)))) return yield* reply("unsupported_configuration")
      }
      const bindingCode = bindingRejection(binding, config.local_environment)
      if (bindingCode !== undefined) return yield* reply(bindingCode)
      if (config.agent_state_key !== undefined && config.agent_state_key !== "") {
        const other = yield* executors.stateKeyOwner(config.agent_state_key, payload.session_id)
        if (Option.isSome(other)) return yield* reply("session_binding_conflict")
      }
      const configFp = configurationFingerprint(config)
      if (!readOnly) {
        const owner = yield* executors.bySession(payload.session_id)
        if (Option.isSome(owner)) {
          const entry = owner.value
          if (entry.closing) {
            // The Executor's close, or a resource it owns (its scratch directory), failed a cleanup attempt.
            const unconfirmed = (yield* ownership.unconfirmed).some((u) => u.resource === entry.id) ||
              (yield* Deferred.isDone(entry.cleanupFailed))
            return yield* reply(unconfirmed ? "executor_cleanup_unconfirmed" : "resource_unavailable")
          }
          if (entry.environmentId !== config.local_environment?.id || entry.configFingerprint !== configFp) {
            return yield* reply("configuration_conflict")
          }
          if (entry.state !== "idle" || entry.native === undefined) return yield* reply("resource_unavailable")
          const native = yield* entry.native.nativeSessionId
          if (config.agent_session_id !== undefined && config.agent_session_id !== "" &&
            Option.getOrUndefined(native) !== config.agent_session_id) {
            return yield* reply("native_session_conflict")
          }
          if (config.require_existing_native_session === true && Option.isNone(native)) return yield* reply("history_unavailable")
          if (!(yield* roomForRecord)) return yield* reply("preparation_capacity")
          const admitted = yield* executors.admitIdle(entry)
          if (admitted._tag === "Failure") {
            return yield* reply(admitted.failure === "not_idle" ? "resource_unavailable" : admitted.failure)
          }
          const record = yield* newRecord({
            requestId, fingerprint: fp, readOnly, snapshot: entry.declaration, harness, entry, configuration: config, reused: true, trace
          })
          return yield* fork(locked(record, grant(record)))
        }
      }
      if (!(yield* roomForRecord)) return yield* reply("preparation_capacity")
      const reserved = yield* executors.reserve(yield* ids.executorId, {
        sessionId: payload.session_id,
        kind: config.agent_kind,
        declaration: snapshot,
        configuration: config,
        configFingerprint: configFp,
        retained: !readOnly,
        readOnly
      })
      if (reserved._tag === "Failure") return yield* reply(reserved.failure)
      const record = yield* newRecord({
        requestId, fingerprint: fp, readOnly, snapshot, harness: readOnly ? undefined : harness, entry: reserved.success,
        configuration: config, reused: false, trace
      })
      yield* FiberMap.run(
        preparations,
        record.handle,
        Effect.andThen(locked(record, publish(record, "preparing")), prepareNative(record, payload.session_id))
      )
    })

    const newRecord = Effect.fnUntraced(function* (fields: NewRecord) {
      const record = makeRecord(fields, yield* ids.handle)
      records.set(record.requestId, record)
      yield* changed
      return record
    })

    const start = Effect.fnUntraced(function* (requestId: PreparationRequestId, payload: ExecutionStartPayload, trace: string | undefined) {
      const record = records.get(requestId)
      if (record === undefined || record.handle !== payload.handle) {
        return yield* fork(reject("execution_start", requestId, "unknown_preparation", trace))
      }
      yield* fork(locked(record, startLocked(record, payload, trace)))
    })

    const startLocked = Effect.fnUntraced(function* (record: AdmissionRecord, payload: ExecutionStartPayload, trace: string | undefined) {
      const reply = (code: PreparationErrorCode) => reject("execution_start", record.requestId, code, trace)
      if (record.readOnly) return yield* reply("read_only_preparation")
      if (payload.executor_id !== record.entry.id) return yield* reply("unknown_executor")
      const fp = fingerprint(payload)
      if (record.startFingerprint !== undefined) {
        return yield* record.startFingerprint === fp ? republish(record, trace) : reply("start_conflict")
      }
      if (record.state === "ready" && record.expiresAt !== undefined && (yield* Clock.currentTimeMillis) >= record.expiresAt) {
        yield* unexpiring(record)
        return yield* expire(record)
      }
      if (record.state !== "ready") return yield* reply("preparation_not_ready")
      if (Option.isSome(validateMessageInput(payload.input))) return yield* reply("invalid_start")
      if (hasImages(payload.input)) {
        // The declaration must support images, and each must meet the public inline image profile.
        if (!record.snapshot.capabilities.message_images) return yield* reply("invalid_start")
        if (Option.isSome(validateInlineImages(payload.input))) return yield* reply("invalid_start")
      }
      if (yield* drain.draining) return yield* reply("resource_unavailable")
      const gate = yield* Latch.make()
      const registered = yield* runs.start({
        runId: payload.run_id,
        kind: record.entry.kind,
        prepared: true,
        requestId: record.requestId,
        trace,
        config: record.configuration,
        snapshot: record.snapshot,
        input: payload.input,
        // The reservation moves to the Run exactly once, after `starting` went out.
        acquire: Effect.as(gate.await, record.entry),
        onStarted: locked(record, publish(record, "started", { trace })).pipe(Effect.asVoid),
        onStartFailed: (refusal) =>
          locked(record, Effect.gen(function* () {
            record.state = "failed"
            yield* changed
            yield* reject("execution_start", record.requestId, refusal.code, trace, {
              handle: record.handle,
              executor_id: record.entry.id
            })
          }))
      })
      if (registered._tag === "Failure") return yield* reply("run_conflict")
      record.startFingerprint = fp
      record.runId = payload.run_id
      yield* unexpiring(record)
      yield* publish(record, "starting", { trace })
      yield* gate.open
    })

    const release = (requestId: PreparationRequestId, payload: ExecutionReleasePayload, trace: string | undefined) =>
      Effect.gen(function* () {
        const record = records.get(requestId)
        if (record === undefined || record.handle !== payload.handle) {
          return yield* fork(reject("execution_release", requestId, "unknown_preparation", trace))
        }
        yield* fork(locked(record, Effect.gen(function* () {
          switch (record.state) {
            case "preparing":
              yield* FiberMap.remove(preparations, record.handle)
              if (yield* closeReported(record)) yield* publish(record, "released", { trace })
              return
            case "ready":
              yield* unexpiring(record)
              if (!record.readOnly) yield* executors.toIdle(record.entry)
              if (!record.readOnly || (yield* closeReported(record))) yield* publish(record, "released", { trace })
              return
            default:
              yield* republish(record, trace)
          }
        })))
      })

    const admission: AdmissionShape = {
      prepare,
      start,
      release,
      rejectInvalid: (operation, requestId, trace) => fork(reject(operation, requestId, invalidCode[operation], trace)),
      shutdown: Effect.gen(function* () {
        yield* FiberMap.clear(preparations)
        for (const record of records.values()) expiries.remove(record)
        yield* Effect.forEach([...records.values()], (record) =>
          locked(record, Effect.gen(function* () {
            if (record.state === "preparing") {
              yield* executors.close(record.entry)
              yield* publish(record, "failed", { error_code: "connection_closed" })
            } else if (record.state === "ready") {
              if (record.readOnly) yield* executors.close(record.entry)
              else yield* executors.toIdle(record.entry)
              yield* publish(record, "failed", { error_code: "connection_closed" })
            }
          })), { discard: true, concurrency: "unbounded" })
      }),
      view: Effect.map(runs.activeIds, (active) =>
        Array.from(records.values(), (r) => ({
          request_id: r.requestId,
          handle: r.handle,
          state: statusState(r, active),
          revision: r.revision,
          executor_id: r.entry.id,
          ...(r.expiresAt === undefined ? {} : { expires_at: r.expiresAt }),
          ...(r.runId === undefined ? {} : { run_id: r.runId })
        })))
    }
    return Admission.of(admission)
  })

/** Execution admission of one connection. */
export class Admission extends Context.Service<Admission, AdmissionShape>()("agentwire/runtime/Admission") {
  static readonly layer = Layer.effect(Admission, makeAdmission)
}
