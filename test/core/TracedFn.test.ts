/**
 * `TracedFn.fn(name)` is `Effect.fn(name)` without the per-call stack trace (issue 18): the body runs in a span
 * of that name and options, under the caller's span, with the caller's pipeables inside it, and its failures
 * pass through unchanged.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { fn } from "../../src/core/TracedFn.js"

/** The span the body runs in, and the name of its parent. */
const observed = Effect.map(Effect.currentSpan, (span) => ({
  span,
  parent: Option.getOrUndefined(Option.map(span.parent, (p) => (p._tag === "Span" ? p.name : p.spanId)))
}))

describe("TracedFn.fn", () => {
  it.effect("runs the body in a span of the name, below the caller's span, with the arguments", () =>
    Effect.gen(function* () {
      const f = fn("Store.method", { attributes: { "agentwire.test": "yes" } })(function* (a: number, b: string) {
        const seen = yield* observed
        return { ...seen, value: `${b}${a}` }
      })
      const result = yield* f(1, "x").pipe(Effect.withSpan("caller"))
      assert.strictEqual(result.value, "x1")
      assert.strictEqual(result.span.name, "Store.method")
      assert.strictEqual(result.span.attributes.get("agentwire.test"), "yes")
      assert.strictEqual(result.parent, "caller")
    }))

  it.effect("applies the caller's pipeables inside the span, and passes a failure through", () =>
    Effect.gen(function* () {
      const f = fn("Store.failing")(
        function* (reason: string) {
          return yield* Effect.fail(reason)
        },
        (self) => Effect.catch(self, (e) => Effect.map(Effect.currentSpan, (span) => `${e} in ${span.name}`))
      )
      assert.strictEqual(yield* f("caught"), "caught in Store.failing")
      const g = fn("Store.failing")(function* (reason: string) {
        return yield* Effect.fail(reason)
      })
      assert.strictEqual(yield* Effect.flip(g("lost")), "lost")
    }))

  it.effect("captures no stack trace per call (Effect.fn captures one)", () =>
    Effect.gen(function* () {
      const f = fn("Store.counted")(function* (n: number) {
        return n + 1
      })
      const g = Effect.fn("Store.counted")(function* (n: number) {
        return n + 1
      })
      const original = globalThis.Error
      let constructed = 0
      globalThis.Error = new Proxy(original, {
        construct(target, args, newTarget) {
          constructed++
          return Reflect.construct(target, args, newTarget) as object
        }
      })
      try {
        assert.strictEqual(yield* f(1), 2)
        const withFn = constructed
        assert.strictEqual(yield* g(1), 2)
        assert.strictEqual(withFn, 0)
        assert.isAbove(constructed, 0)
      } finally {
        globalThis.Error = original
      }
    }))
})
