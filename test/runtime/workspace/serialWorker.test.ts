/**
 * The connection services' serial worker: steps run one at a time in submission order, `submit` never waits for
 * a running step, and a failed or dying step does not stop the ones after it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import * as SerialWorker from "../../../src/runtime/workspace/internal/serialWorker.js"

describe("serial worker", () => {
  it.effect("runs steps one at a time in order; submit returns while a step is still running", () =>
    Effect.scoped(Effect.gen(function*() {
      const worker = yield* SerialWorker.make("test")
      const log: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const done = yield* Deferred.make<void>()
      yield* worker.submit(Effect.gen(function*() {
        log.push("a:start")
        yield* Deferred.await(gate)
        log.push("a:end")
      }))
      yield* worker.submit(Effect.sync(() => log.push("b")))
      yield* worker.submit(Deferred.succeed(done, undefined))
      yield* Effect.yieldNow
      assert.deepStrictEqual(log, ["a:start"])
      yield* Deferred.succeed(gate, undefined)
      yield* Deferred.await(done)
      assert.deepStrictEqual(log, ["a:start", "a:end", "b"])
    })))

  it.effect("a failed or dying step is logged and the next one still runs", () =>
    Effect.scoped(Effect.gen(function*() {
      const worker = yield* SerialWorker.make("test")
      const done = yield* Deferred.make<string>()
      yield* worker.submit(Effect.fail("boom") as unknown as Effect.Effect<void>)
      yield* worker.submit(Effect.die("defect"))
      yield* worker.submit(Deferred.succeed(done, "ran").pipe(Effect.asVoid))
      assert.strictEqual(yield* Deferred.await(done), "ran")
    })))

  it.effect("an idle worker runs a submitted step's synchronous part before submit returns; a busy one queues it", () =>
    Effect.scoped(Effect.gen(function*() {
      const worker = yield* SerialWorker.make("test")
      const log: Array<string> = []
      // Let the worker reach its wait.
      yield* Effect.yieldNow
      yield* worker.submit(Effect.sync(() => log.push("a")))
      assert.deepStrictEqual(log, ["a"])
      const gate = yield* Deferred.make<void>()
      yield* worker.submit(Effect.andThen(Effect.sync(() => log.push("b:start")), Effect.andThen(Deferred.await(gate), Effect.sync(() => log.push("b:end")))))
      assert.deepStrictEqual(log, ["a", "b:start"])
      yield* worker.submit(Effect.sync(() => log.push("c")))
      assert.deepStrictEqual(log, ["a", "b:start"])
      yield* Deferred.succeed(gate, undefined)
      for (let i = 0; i < 10 && log.length < 4; i++) yield* Effect.yieldNow
      assert.deepStrictEqual(log, ["a", "b:start", "b:end", "c"])
    })))
})
