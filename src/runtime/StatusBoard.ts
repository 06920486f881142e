/**
 * The daemon's local status, read by `agentwire status` over the control socket. Process-level: the daemon
 * loop publishes the connection state; the per-connection logic attaches a live view of its admissions,
 * Executors, Runs and unconfirmed cleanups for as long as its scope is open (including while that scope is
 * closing and waiting for confirmed cleanup). Reading a snapshot never changes anything.
 *
 * Every `setConnection`, `setKinds`, attach or detach of a view, and every `touch` (the per-connection modules call
 * it where their admissions, Executors, Runs or ownership records change state, never per frame) bumps a change
 * count (a `SubscriptionRef`), which wakes whoever armed `changes`; tools and tests wait on it instead of polling.
 * The snapshot itself is computed when it is read (`snapshot`, `updates`), once per change at most (issue 18,
 * "statusboard": computed at every change, the view of up to 64 retained admissions, the Executors and the Runs
 * was ≈ 14 % of the daemon's main thread in the turns suite, for a status nobody read). The metrics it feeds (the
 * connection state, the unconfirmed cleanups) are updated at each change, only when they differ.
 */
import { Context, Effect, Layer, Ref, Schema, type Scope, Stream, SubscriptionRef } from "effect"
import { statusChanged } from "./RuntimeMetrics.js"

export const ConnectionState = Schema.Literals(["starting", "connecting", "connected", "backoff", "stopped"])
export type ConnectionState = typeof ConnectionState.Type

export const ConnectionStatus = Schema.Struct({
  state: ConnectionState,
  device_id: Schema.String,
  /** The Core origin (never with credentials). */
  core_url: Schema.String,
  connection_number: Schema.Int,
  /** Unix ms of the last state change. */
  since_ms: Schema.Int,
  /** Operator-readable text of the last connection failure; never contains the credential. */
  last_error: Schema.optionalKey(Schema.String),
  /** Unix ms of the next reconnection attempt while in backoff. */
  next_attempt_ms: Schema.optionalKey(Schema.Int)
})
export type ConnectionStatus = typeof ConnectionStatus.Type

export const KindStatus = Schema.Struct({
  kind: Schema.String,
  available: Schema.Boolean,
  version: Schema.optionalKey(Schema.String),
  /** Why the kind is unavailable (discovery's reason, sanitized); local only, never sent on the wire. */
  unavailable_reason: Schema.optionalKey(Schema.String),
  /** Supported capability names, in declaration order. */
  supported: Schema.Array(Schema.String)
})

export const AdmissionStatus = Schema.Struct({
  /** Core's correlation of this Turn's admission (the execution_prepare Envelope.id). */
  request_id: Schema.String,
  handle: Schema.String,
  /**
   * The admission's real state: the wire states, except that a `started` admission is `running` while its Run
   * is active and `finished` once it ended (a finished Turn's admission is never shown as live).
   */
  state: Schema.String,
  revision: Schema.Int,
  executor_id: Schema.optionalKey(Schema.String),
  expires_at: Schema.optionalKey(Schema.Int),
  run_id: Schema.optionalKey(Schema.String)
})

export const ExecutorStatus = Schema.Struct({
  executor_id: Schema.String,
  session_id: Schema.String,
  kind: Schema.String,
  state: Schema.Literals(["preparing", "idle", "busy", "closing", "cleanup_unconfirmed"])
})

export const RunStatus = Schema.Struct({
  run_id: Schema.String,
  /**
   * Core's Turn correlation for a prepared Run: the request id of the execution_prepare that admitted it (the
   * wire carries no Core Turn id; this is the id Core chose for the Turn's admission). Absent for a direct Run.
   */
  request_id: Schema.optionalKey(Schema.String),
  kind: Schema.String,
  executor_id: Schema.optionalKey(Schema.String),
  state: Schema.Literals(["running", "cancelling", "settling"])
})

/** A resource the daemon still owns because its cleanup has not been confirmed. */
export const UnconfirmedCleanup = Schema.Struct({
  resource: Schema.String,
  kind: Schema.Literals(["executor", "run", "admission", "interaction", "input", "transfer", "workspace"]),
  attempts: Schema.Int,
  last_error: Schema.String
})

/** What the per-connection logic contributes. */
export const RuntimeView = Schema.Struct({
  active_runs: Schema.Int,
  admissions: Schema.Array(AdmissionStatus),
  executors: Schema.Array(ExecutorStatus),
  runs: Schema.Array(RunStatus),
  unconfirmed: Schema.Array(UnconfirmedCleanup)
})
export type RuntimeView = typeof RuntimeView.Type

/**
 * The suspension fence (Suspension.ts; reference §8.1), process-level: `open` admits work; `quiescing` an
 * accepted quiesce drains before its reply; `suspended` the persisted suspension fences every connection until
 * the matching `environment_resume` arrives as its first frame. The identities are not secret.
 */
export const SuspensionStatus = Schema.Struct({
  state: Schema.Literals(["open", "quiescing", "suspended"]),
  environment_id: Schema.optionalKey(Schema.String),
  suspend_id: Schema.optionalKey(Schema.String)
})
export type SuspensionStatus = typeof SuspensionStatus.Type

export const StatusSnapshot = Schema.Struct({
  daemon_version: Schema.String,
  wire_version: Schema.String,
  pid: Schema.Int,
  connection: ConnectionStatus,
  suspension: SuspensionStatus,
  kinds: Schema.Array(KindStatus),
  ...RuntimeView.fields
})
export type StatusSnapshot = typeof StatusSnapshot.Type

const emptyView: RuntimeView = { active_runs: 0, admissions: [], executors: [], runs: [], unconfirmed: [] }

/** Change notifications of a board. */
export interface BoardChanges {
  /**
   * Registers interest now and returns the wait: it completes at the first change after this call (at once
   * when one already happened). Arm before reading a snapshot, then await, so a change between the read and
   * the wait is never missed. A wait that is never awaited holds nothing.
   */
  readonly arm: Effect.Effect<Effect.Effect<void>>
  /** How many changes happened so far (monotonic). */
  readonly version: Effect.Effect<number>
}

/**
 * The signal behind `changes`: a `SubscriptionRef` of the change count. An armed wait remembers the count it was
 * armed at and takes the first value above it from `SubscriptionRef.changes` (which starts with the current one),
 * so a change between arming and awaiting is never missed.
 */
const makeSignal = Effect.gen(function* () {
  const version = yield* SubscriptionRef.make(0)
  const changes: BoardChanges = {
    arm: Effect.map(SubscriptionRef.get(version), (armedAt) =>
      SubscriptionRef.changes(version).pipe(
        Stream.filter((count) => count > armedAt),
        Stream.runHead,
        Effect.asVoid
      )),
    version: SubscriptionRef.get(version)
  }
  return { notify: SubscriptionRef.update(version, (count) => count + 1), changes, version }
})

/** An attached view and how it counts its unconfirmed cleanups (the object itself is its identity for detaching). */
interface Attached {
  readonly view: Effect.Effect<RuntimeView>
  readonly unconfirmed: Effect.Effect<number>
}

export class StatusBoard extends Context.Service<StatusBoard, {
  /** Replaces the connection section (the daemon loop calls it on every state change). */
  readonly setConnection: (status: ConnectionStatus) => Effect.Effect<void>
  /** Replaces the suspension section (Suspension.ts on every fence change; the daemon loop at start). */
  readonly setSuspension: (status: SuspensionStatus) => Effect.Effect<void>
  /** Replaces the declared kinds (from the harness registry). */
  readonly setKinds: (kinds: ReadonlyArray<typeof KindStatus.Type>) => Effect.Effect<void>
  /**
   * Attaches a live view for the lifetime of the current scope; the latest attach wins. `unconfirmed` counts its
   * unconfirmed cleanups (read at every change, for the metric; cheap), the view's `unconfirmed.length` by default.
   */
  readonly attachView: (view: Effect.Effect<RuntimeView>, unconfirmed?: Effect.Effect<number>) => Effect.Effect<void, never, Scope.Scope>
  /** The current snapshot, computed from the state as of now (once per change: later reads reuse it). */
  readonly snapshot: Effect.Effect<StatusSnapshot>
  /**
   * The attached view's state changed (an admission, Executor, Run or ownership record moved): recompute the
   * snapshot. Call it at state transitions, never per frame.
   */
  readonly touch: Effect.Effect<void>
  /** Wakes waiters on every change of the snapshot's inputs (see `BoardChanges`). */
  readonly changes: BoardChanges
  /**
   * The current snapshot, then the snapshot after each change, each computed when it is taken (changes that come
   * before the reader takes the next one are read as one: the last value is always the latest state).
   */
  readonly updates: Stream.Stream<StatusSnapshot>
}>()("agentwire/runtime/StatusBoard") {
  /** A board for this process. */
  static readonly make = (info: { readonly daemonVersion: string; readonly wireVersion: string; readonly pid: number; readonly deviceId: string; readonly coreUrl: string }) =>
    Effect.gen(function* () {
      const connection = yield* Ref.make<ConnectionStatus>({
        state: "starting",
        device_id: info.deviceId,
        core_url: info.coreUrl,
        connection_number: 0,
        since_ms: 0
      })
      const kinds = yield* Ref.make<ReadonlyArray<typeof KindStatus.Type>>([])
      const suspension = yield* Ref.make<SuspensionStatus>({ state: "open" })
      const views = yield* Ref.make<ReadonlyArray<Attached>>([])
      /** The view attached last (the latest attach wins), if any. */
      const latestView = Effect.map(Ref.get(views), (attached) => attached[attached.length - 1])
      const compute = Effect.gen(function* () {
        const latest = yield* latestView
        const view = latest === undefined ? emptyView : yield* latest.view
        return {
          daemon_version: info.daemonVersion,
          wire_version: info.wireVersion,
          pid: info.pid,
          connection: yield* Ref.get(connection),
          suspension: yield* Ref.get(suspension),
          kinds: yield* Ref.get(kinds),
          ...view
        } satisfies StatusSnapshot
      })
      // The snapshot as of the last change, once a read computed it; `generation` counts the changes, so a read
      // that a change overtook while it computed leaves nothing behind.
      let cached: StatusSnapshot | undefined
      let generation = 0
      const snapshot = Effect.suspend(() => {
        if (cached !== undefined) return Effect.succeed(cached)
        const at = generation
        return Effect.map(compute, (next) => {
          if (generation === at) cached = next
          return next
        })
      })
      // The metrics, at each change, updated only when they differ (no snapshot is computed for them).
      let reported: { readonly state: ConnectionState; readonly unconfirmed: number } | undefined
      const report = Effect.gen(function* () {
        const latest = yield* latestView
        const state = (yield* Ref.get(connection)).state
        const unconfirmed = latest === undefined ? 0 : yield* latest.unconfirmed
        if (reported !== undefined && reported.state === state && reported.unconfirmed === unconfirmed) return
        reported = { state, unconfirmed }
        yield* statusChanged(state, unconfirmed)
      })
      yield* report
      const { changes, notify, version } = yield* makeSignal
      const refresh = Effect.suspend(() => {
        generation++
        cached = undefined
        return Effect.andThen(report, notify)
      })
      return StatusBoard.of({
        setConnection: (status) => Effect.andThen(Ref.set(connection, status), refresh),
        setSuspension: (next) => Effect.andThen(Ref.set(suspension, next), refresh),
        setKinds: (next) => Effect.andThen(Ref.set(kinds, next), refresh),
        attachView: (view, unconfirmed) => {
          const attached: Attached = { view, unconfirmed: unconfirmed ?? Effect.map(view, (v) => v.unconfirmed.length) }
          return Effect.acquireRelease(
            Effect.andThen(Ref.update(views, (vs) => [...vs, attached]), refresh),
            () => Effect.andThen(Ref.update(views, (vs) => vs.filter((v) => v !== attached)), refresh)
          )
        },
        touch: refresh,
        changes,
        updates: SubscriptionRef.changes(version).pipe(Stream.mapEffect(() => snapshot)),
        snapshot
      })
    })

  static readonly layer = (info: Parameters<typeof StatusBoard.make>[0]) => Layer.effect(StatusBoard, StatusBoard.make(info))
}
