/**
 * Small per-connection services every family shares, built fresh inside each connection's scope as part of
 * `ConnectionLayer` (Connection.ts): the connection's background fibers and its drain state.
 */
import { Context, Deferred, Effect, FiberSet, Layer } from "effect"

/**
 * Connection-owned fibers that outlive the handler that started them (receipt sends and waiters, native cancel
 * requests, admission operations). Interrupted when the connection's scope closes.
 */
export class Background extends Context.Service<Background, FiberSet.FiberSet<unknown, unknown>>()(
  "agentwire/runtime/Background"
) {
  static readonly layer = Layer.effect(Background, FiberSet.make<unknown, unknown>())

  /** Runs `effect` in the connection's background fibers; returns at once. */
  static readonly fork = <A, E>(background: FiberSet.FiberSet<unknown, unknown>, effect: Effect.Effect<A, E>) =>
    FiberSet.run(background, effect).pipe(Effect.asVoid)
}

/** `device_shutdown` state: once draining, new work is refused; `drained` completes when cleanup confirmed. */
export class Drain extends Context.Service<Drain, {
  /** True once device_shutdown began. */
  readonly draining: Effect.Effect<boolean>
  /** Marks the drain begun; false when it already was (device_shutdown is idempotent). */
  readonly begin: Effect.Effect<boolean>
  /** Completes once Runs stopped, admissions failed and every Executor's close was confirmed. */
  readonly drained: Deferred.Deferred<void>
}>()("agentwire/runtime/Drain") {
  static readonly layer = Layer.effect(
    Drain,
    Effect.gen(function* () {
      let draining = false
      const drained = yield* Deferred.make<void>()
      return Drain.of({
        draining: Effect.sync(() => draining),
        begin: Effect.sync(() => {
          if (draining) return false
          draining = true
          return true
        }),
        drained
      })
    })
  )
}

/**
 * Workspace mutations that exclude execution (protocol "Workspace operations": the Runtime excludes execution
 * while it receives or applies a write; an export or write in progress refuses new preparations). Admission and
 * direct Runs refuse new work (`resource_unavailable`) while `busy`.
 */
export class WorkspaceGate extends Context.Service<WorkspaceGate, {
  readonly busy: Effect.Effect<boolean>
  /** Marks one mutation in progress until the returned effect runs. */
  readonly enter: Effect.Effect<Effect.Effect<void>>
}>()("agentwire/runtime/WorkspaceGate") {
  static readonly layer = Layer.sync(WorkspaceGate, () => {
    let count = 0
    return WorkspaceGate.of({
      busy: Effect.sync(() => count > 0),
      enter: Effect.sync(() => {
        count++
        let left = false
        return Effect.sync(() => {
          if (!left) {
            left = true
            count--
          }
        })
      })
    })
  })
}
