/**
 * Active capacity as permits held by scopes (protocol "Preparation and execution order": at most `maxActive`
 * active preparations and executions, counting closing or uncertain resources until their cleanup confirms).
 *
 * A permit exists only inside a scope: `acquire(scope)` takes one with `Effect.acquireRelease` in that scope, and
 * closing the scope is the only way it is returned. Each admission (and each direct Run) holds its permit in its
 * own scope, a child of its Executor's scope (Executors.ts), so the permit returns exactly when that ownership
 * ends: the Executor went back to the idle pool, or its close was confirmed. Nothing queues: `acquire` answers
 * at once. `acquireBeyond` takes a permit even past the bound, for an idle Executor that starts closing (it held
 * none while idle, and counts as active until its close confirms).
 */
import { Effect, Scope } from "effect"

export interface CapacityPermits {
  /** Takes a permit inside `scope` when one is free (true), or nothing (false). */
  readonly acquire: (scope: Scope.Scope) => Effect.Effect<boolean>
  /** Takes a permit inside `scope` even when none is free. */
  readonly acquireBeyond: (scope: Scope.Scope) => Effect.Effect<void>
  /** Permits currently held (synchronous read for atomic capacity checks). */
  readonly inUse: () => number
}

export const makeCapacityPermits = (max: number): CapacityPermits => {
  let held = 0
  const take = (scope: Scope.Scope, beyond: boolean) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        if (!beyond && held >= max) return false
        held++
        return true
      }),
      (taken) => taken ? Effect.sync(() => void held--) : Effect.void
    ).pipe(Scope.provide(scope))
  return {
    acquire: (scope) => take(scope, false),
    acquireBeyond: (scope) => Effect.asVoid(take(scope, true)),
    inUse: () => held
  }
}
