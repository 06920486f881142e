import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as WriterLock from "../../../src/core/dev/WriterLock.js"
import { yieldTimes } from "../../support/coreFakeSession.js"

/** A call that logs its start, waits for `gate`, then logs its end. */
const gated = (lock: WriterLock.WriterLock, log: Array<string>, name: string, gate: Deferred.Deferred<void>) =>
  lock.run(() =>
    Effect.gen(function* () {
      log.push(`${name}:start`)
      yield* Deferred.await(gate)
      log.push(`${name}:end`)
    })
  )

describe("WriterLock", () => {
  it.effect("runs calls one at a time in call order, a free lock taken at once", () =>
    Effect.gen(function* () {
      const lock = WriterLock.make()
      const log: Array<string> = []
      const gates = [yield* Deferred.make<void>(), yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const fibers = []
      for (const [i, name] of ["a", "b", "c"].entries()) {
        fibers.push(yield* Effect.forkChild(gated(lock, log, name, gates[i]!)))
        yield* yieldTimes(5)
      }
      assert.deepStrictEqual(log, ["a:start"])
      // Released in the reverse order: each call still waits for the one before it.
      yield* Deferred.succeed(gates[2]!, undefined)
      yield* Deferred.succeed(gates[1]!, undefined)
      yield* yieldTimes(20)
      assert.deepStrictEqual(log, ["a:start"])
      yield* Deferred.succeed(gates[0]!, undefined)
      for (const fiber of fibers) yield* Fiber.join(fiber)
      assert.deepStrictEqual(log, ["a:start", "a:end", "b:start", "b:end", "c:start", "c:end"])
      // Free again: a later call runs in its caller's step.
      assert.strictEqual(yield* lock.run(() => Effect.succeed(7)), 7)
    }))

  it.effect("a failing call, an interrupted holder and an interrupted waiter each leave the lock usable", () =>
    Effect.gen(function* () {
      const lock = WriterLock.make()
      const log: Array<string> = []
      const failed = yield* Effect.exit(lock.run(() => Effect.fail("boom")))
      assert.isTrue(Exit.isFailure(failed))
      const never = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(gated(lock, log, "holder", never))
      yield* yieldTimes(5)
      const waiter = yield* Effect.forkChild(gated(lock, log, "waiter", never))
      const last = yield* Deferred.make<void>()
      yield* Deferred.succeed(last, undefined)
      const after = yield* Effect.forkChild(gated(lock, log, "after", last))
      yield* yieldTimes(5)
      // The queued waiter leaves the queue; then the holder is interrupted and hands the lock to `after`.
      yield* Fiber.interrupt(waiter)
      yield* Fiber.interrupt(holder)
      yield* Fiber.join(after)
      assert.deepStrictEqual(log, ["holder:start", "after:start", "after:end"])
      assert.strictEqual(yield* lock.run(() => Effect.succeed("free")), "free")
    }))

  it.effect("a waiter interrupted after the lock was handed to it passes it on", () =>
    Effect.gen(function* () {
      const lock = WriterLock.make()
      const log: Array<string> = []
      const first = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(gated(lock, log, "holder", first))
      yield* yieldTimes(5)
      const open = yield* Deferred.make<void>()
      yield* Deferred.succeed(open, undefined)
      const waiter = yield* Effect.forkChild(gated(lock, log, "waiter", open))
      const next = yield* Effect.forkChild(gated(lock, log, "next", open))
      yield* yieldTimes(5)
      // The holder ends and hands the lock to `waiter`, which is interrupted before it runs.
      yield* Deferred.succeed(first, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.interrupt(waiter)
      yield* Fiber.join(next)
      assert.strictEqual(log[0], "holder:start")
      assert.strictEqual(log[1], "holder:end")
      assert.deepStrictEqual(log.slice(-2), ["next:start", "next:end"])
    }))
})
