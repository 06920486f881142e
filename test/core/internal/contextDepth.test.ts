/**
 * `withContextDepth` (issue 18, "ctxdepth"): a layer built through it keeps its services and its finalizers, and the
 * contexts of what it built (the fibers it serves from) stack `maxDepth` services before Effect copies the map.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { withContextDepth } from "../../../src/core/internal/contextDepth.js"

class Greeting extends Context.Service<Greeting, { readonly text: string }>()("test/Greeting") {}
/** What the layer saw when it was built: the context its own fibers would start from. */
class Captured extends Context.Service<Captured, Context.Context<never>>()("test/Captured") {}

/** Effect's own record of a context's chain limit (not public API; read only to check the helper's effect). */
const maxDepthOf = (context: Context.Context<never>): number => (context as unknown as { readonly maxDepth: number }).maxDepth

const layer = (log: Array<string>) =>
  Layer.mergeAll(
    Layer.succeed(Greeting, { text: "hello" }),
    Layer.effect(Captured, Effect.acquireRelease(Effect.context<never>(), () => Effect.sync(() => log.push("released"))))
  )

describe("withContextDepth", () => {
  it.effect("builds the layer's services, with the chain limit it was given, and keeps its finalizers in the scope", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const scope = yield* Scope.make()
      const built = yield* Layer.buildWithScope(layer(log).pipe(withContextDepth(32)), scope)
      assert.strictEqual(Context.get(built, Greeting).text, "hello")
      const captured = Context.get(built, Captured)
      assert.strictEqual(maxDepthOf(captured), 32)
      // Every context derived from it keeps the limit: 20 services added one by one are still all there.
      let derived = captured as Context.Context<unknown>
      for (let i = 0; i < 20; i++) derived = Context.add(derived, Context.Service<unknown>(`test/Extra${i}`), i)
      assert.strictEqual(maxDepthOf(derived as Context.Context<never>), 32)
      assert.strictEqual(Context.getUnsafe(derived, Context.Service<number>("test/Extra7")), 7)
      assert.deepStrictEqual(log, [])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(log, ["released"])
    }))

  it.effect("without it the same layer's context has Effect's default limit (8)", () =>
    Effect.gen(function* () {
      const built = yield* Layer.build(layer([]))
      assert.strictEqual(maxDepthOf(Context.get(built, Captured)), 8)
    }).pipe(Effect.scoped))
})
