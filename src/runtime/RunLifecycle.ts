/**
 * The lifecycle events of this connection's Runs. `Runs` publishes them; the families that follow a Run
 * (Steering, Interactions, Functions) subscribe in their own layer, so `Runs` knows none of them and each
 * family keeps its own per-Run state (style guide §11: no hook callbacks threaded through `make(deps)`).
 *
 * Delivery is synchronous and in subscription order: `publish` returns after every listener returned, so an
 * event orders what happens next on the Run — a route is registered before its frame is queued (`Emitted`),
 * and in-flight inputs settle (each family bounds its own wait) before `done` is queued (`Settled`). A listener
 * never fails; whatever it waits on it bounds itself.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type { TurnEvent } from "./harness/Harness.js"
import type { RunRecord } from "./RunRecord.js"

export type RunLifecycleEvent =
  /** The Run's Turn exists (native start succeeded). */
  | { readonly _tag: "Started"; readonly run: RunRecord }
  /** An interaction or function event, before its frame is queued (`permission_request`, `permission_cancel`, `prompt_for_user_choice`, `function_call`). */
  | { readonly _tag: "Emitted"; readonly run: RunRecord; readonly event: TurnEvent }
  /** Native settlement was observed (or found unconfirmed); input and function admission are closed; `done` is not queued yet. */
  | { readonly _tag: "Settled"; readonly run: RunRecord }
  /** The Run's output stream is closed (`done` handed over, or no `done` when settlement is unconfirmed). */
  | { readonly _tag: "OutputClosed"; readonly run: RunRecord }
  /** The Run is over (finished, refused or stopped locally): drop its per-Run state. */
  | { readonly _tag: "Stopped"; readonly run: RunRecord }

export type RunLifecycleListener = (event: RunLifecycleEvent) => Effect.Effect<void>

export class RunLifecycle extends Context.Service<RunLifecycle, {
  /** Delivers `event` to every listener, in subscription order; returns when each returned. */
  readonly publish: (event: RunLifecycleEvent) => Effect.Effect<void>
  /** Adds a listener for the lifetime of the current scope (the subscribing family's layer). */
  readonly subscribe: (listener: RunLifecycleListener) => Effect.Effect<void, never, Scope.Scope>
}>()("agentwire/runtime/RunLifecycle") {
  static readonly layer = Layer.sync(RunLifecycle, () => {
    const listeners: Array<RunLifecycleListener> = []
    return RunLifecycle.of({
      publish: (event) => Effect.forEach(listeners.slice(), (listener) => listener(event), { discard: true }),
      subscribe: (listener) =>
        Effect.acquireRelease(
          Effect.sync(() => void listeners.push(listener)),
          () => Effect.sync(() => {
            const index = listeners.indexOf(listener)
            if (index >= 0) listeners.splice(index, 1)
          })
        )
    })
  })
}
