/**
 * Process-level record of the native resources the daemon still owns and of every cleanup that has not been
 * confirmed (style guide §7). Each resource moves Active → Closing → CleanupUnconfirmed{attempts, lastCause} →
 * removed; only a confirmed close removes it. `closeUntilConfirmed` is the one way to close a native
 * resource: each attempt is bounded, a timeout counts as a failed attempt, failures are recorded and retried
 * serially with capped backoff forever, and the call returns only once the close is confirmed. Nothing here
 * frees capacity or publishes a status: callers do that after `closeUntilConfirmed` returns.
 */
import { Context, Data, Effect, Layer } from "effect"
import type { UnconfirmedCleanup as UnconfirmedCleanupSchema } from "./StatusBoard.js"
import { RuntimePolicy } from "./RuntimePolicy.js"

type UnconfirmedCleanup = typeof UnconfirmedCleanupSchema.Type

export type ResourceKind = UnconfirmedCleanup["kind"]

export type OwnershipState =
  | { readonly _tag: "Active" }
  | { readonly _tag: "Closing" }
  | { readonly _tag: "CleanupUnconfirmed"; readonly attempts: number; readonly lastCause: string }

export interface OwnedResource {
  readonly resource: string
  readonly kind: ResourceKind
  readonly state: OwnershipState
}

/** One close attempt did not confirm cleanup (failed or timed out). The resource stays owned. */
export class CleanupAttemptFailed extends Data.TaggedError("CleanupAttemptFailed")<{ readonly reason: string }> {}

export class Ownership extends Context.Service<Ownership, {
  /** Records a resource as owned and active. */
  readonly acquire: (resource: string, kind: ResourceKind) => Effect.Effect<void>
  /** Marks a close in progress. */
  readonly closing: (resource: string) => Effect.Effect<void>
  /** Records one failed close attempt; the resource stays owned. */
  readonly attemptFailed: (resource: string, cause: string) => Effect.Effect<void>
  /** The close was confirmed: the resource is no longer owned. */
  readonly confirmed: (resource: string) => Effect.Effect<void>
  /** Everything still owned. */
  readonly owned: Effect.Effect<ReadonlyArray<OwnedResource>>
  /** Owned resources whose cleanup has failed at least once (for `agentwire status`). */
  readonly unconfirmed: Effect.Effect<ReadonlyArray<UnconfirmedCleanup>>
}>()("agentwire/runtime/Ownership") {
  static readonly layer = Layer.sync(Ownership, () => {
    const records = new Map<string, OwnedResource>()
    const set = (resource: string, f: (r: OwnedResource) => OwnedResource) =>
      Effect.sync(() => {
        const current = records.get(resource)
        if (current !== undefined) records.set(resource, f(current))
      })
    return Ownership.of({
      acquire: (resource, kind) => Effect.sync(() => void records.set(resource, { resource, kind, state: { _tag: "Active" } })),
      closing: (resource) =>
        set(resource, (r) => r.state._tag === "Active" ? { ...r, state: { _tag: "Closing" } } : r),
      attemptFailed: (resource, cause) =>
        set(resource, (r) => ({
          ...r,
          state: {
            _tag: "CleanupUnconfirmed",
            attempts: r.state._tag === "CleanupUnconfirmed" ? r.state.attempts + 1 : 1,
            lastCause: cause
          }
        })),
      confirmed: (resource) => Effect.sync(() => void records.delete(resource)),
      owned: Effect.sync(() => [...records.values()]),
      unconfirmed: Effect.sync(() => {
        const out: Array<UnconfirmedCleanup> = []
        for (const r of records.values()) {
          if (r.state._tag === "CleanupUnconfirmed") {
            out.push({ resource: r.resource, kind: r.kind, attempts: r.state.attempts, last_error: r.state.lastCause })
          }
        }
        return out
      })
    })
  })
}

/**
 * The same records, with `onChange` run after every change of them (a connection passes its status board's
 * `touch`, so a failed or confirmed cleanup wakes whoever waits on the board). Reads are unchanged.
 */
export const observed = (ownership: Ownership["Service"], onChange: Effect.Effect<void>): Ownership["Service"] =>
  Ownership.of({
    ...ownership,
    acquire: (resource, kind) => Effect.andThen(ownership.acquire(resource, kind), onChange),
    closing: (resource) => Effect.andThen(ownership.closing(resource), onChange),
    attemptFailed: (resource, cause) => Effect.andThen(ownership.attemptFailed(resource, cause), onChange),
    confirmed: (resource) => Effect.andThen(ownership.confirmed(resource), onChange)
  })

/** The longest adapter-supplied cause text that is logged or shown in `agentwire status`. */
export const MaxCauseChars = 200

/**
 * An adapter's close-error text made safe to log and to show: control characters (C0, DEL, C1, line and
 * paragraph separators, bidirectional controls) removed, then cut to `MaxCauseChars` characters (a cut text
 * ends with "…"). The adapter is native code we do not control; its text is never logged raw.
 */
export const sanitizeCause = (text: string): string => {
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "")
  const chars = Array.from(clean)
  return chars.length <= MaxCauseChars ? clean : `${chars.slice(0, MaxCauseChars - 1).join("")}…`
}

/**
 * Closes a resource until the close is confirmed. Each attempt is bounded by the policy's close timeout (a
 * timeout is a failed attempt); each failure is recorded in `Ownership` and logged, then retried with the
 * policy's capped backoff, forever. The failure text (`describe`) is sanitized and bounded (`sanitizeCause`)
 * before it is recorded or logged. Uninterruptible: closing a scope that runs it waits for confirmation,
 * which is what shutdown and reconnection require. Success proves the native close confirmed; the caller
 * may then free capacity and publish `released`.
 */
export const closeUntilConfirmed = <E>(
  resource: string,
  close: Effect.Effect<void, E>,
  describe: (error: E) => string
): Effect.Effect<void, never, Ownership | RuntimePolicy> =>
  Effect.gen(function* () {
    const ownership = yield* Ownership
    const policy = yield* RuntimePolicy
    yield* ownership.closing(resource)
    const attempt = close.pipe(
      Effect.mapError((e) => new CleanupAttemptFailed({ reason: sanitizeCause(describe(e)) })),
      Effect.timeoutOrElse({
        duration: policy.closeAttemptTimeout,
        orElse: () => Effect.fail(new CleanupAttemptFailed({ reason: "close attempt timed out" }))
      }),
      Effect.tapError((e) =>
        Effect.andThen(
          ownership.attemptFailed(resource, e.reason),
          Effect.logWarning("cleanup not confirmed; keeping ownership and retrying").pipe(
            Effect.annotateLogs({ resource, cause: e.reason })
          )
        )
      )
    )
    yield* attempt.pipe(Effect.retry(policy.cleanupBackoff), Effect.orDie)
    yield* ownership.confirmed(resource)
  }).pipe(Effect.uninterruptible)
