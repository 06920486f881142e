/**
 * What the Runtime provides to a Harness preparation (the Executor table does it in the daemon): an `Ownership`
 * for the resources the adapter closes in its releases (OwnedDirectory.ts) and the `RuntimePolicy`. Tests that
 * call `Harness.prepare` directly provide fresh ones.
 */
import { Effect, Layer } from "effect"
import { Ownership } from "../../src/runtime/Ownership.js"
import { RuntimePolicy } from "../../src/runtime/RuntimePolicy.js"

export const preparationServices = Layer.mergeAll(Ownership.layer, RuntimePolicy.layer())

export const withPreparationServices = <A, E, R>(
  preparation: Effect.Effect<A, E, R>
): Effect.Effect<A, E, Exclude<R, Ownership | RuntimePolicy>> => Effect.provide(preparation, preparationServices)
