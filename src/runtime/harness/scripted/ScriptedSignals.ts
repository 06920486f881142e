/**
 * Named one-shot signals that let a test, a demo or an external conformance check control native settlement
 * of the `scripted` harness deterministically (`{"wait": name}`, `{"cancel_settles_on": name}`,
 * `withdraw_on`, `prepare_wait`). A fired signal stays fired; waiting on it afterwards returns at once.
 * Process-level: one registry shared by every connection.
 */
import { Context, Deferred, Effect, Layer } from "effect"

export class ScriptedSignals extends Context.Service<ScriptedSignals, {
  /** Fires a signal (idempotent): every current and future waiter on `name` proceeds. */
  readonly fire: (name: string) => Effect.Effect<void>
  /** Waits until `name` has fired. */
  readonly await: (name: string) => Effect.Effect<void>
  /** Whether `name` has fired. */
  readonly isFired: (name: string) => Effect.Effect<boolean>
}>()("agentwire/runtime/harness/scripted/ScriptedSignals") {
  static readonly make = Effect.sync(() => {
    const signals = new Map<string, Deferred.Deferred<void>>()
    const get = (name: string) => {
      let signal = signals.get(name)
      if (signal === undefined) {
        signal = Deferred.makeUnsafe<void>()
        signals.set(name, signal)
      }
      return signal
    }
    return ScriptedSignals.of({
      fire: (name) => Effect.suspend(() => Deferred.succeed(get(name), undefined)).pipe(Effect.asVoid),
      await: (name) => Effect.suspend(() => Deferred.await(get(name))),
      isFired: (name) => Effect.sync(() => Deferred.isDoneUnsafe(get(name)))
    })
  })

  static readonly layer = Layer.effect(ScriptedSignals, ScriptedSignals.make)
}
