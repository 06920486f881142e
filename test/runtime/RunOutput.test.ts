/**
 * A Run's output buffer (`RunOutput.ts`): batches in order, bounded with waiting offers queued in order when a take
 * makes room, the end drained before `Cause.Done`, an interrupted wait leaving nothing behind, and the two batch
 * arrays taking turns (a batch is the consumer's until its next take).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import * as RunOutput from "../../src/runtime/RunOutput.js"

describe("RunOutput", () => {
  it.effect("hands over everything queued, in order, and wakes a waiting take after the producer yields", () =>
    Effect.gen(function* () {
      const output = yield* RunOutput.make<number>(4)
      assert.isTrue(output.offerUnsafe(1))
      assert.isTrue(output.offerUnsafe(2))
      assert.deepStrictEqual([...(yield* output.takeAll)], [1, 2])
      const waiting = yield* Effect.forkChild(output.takeAll, { startImmediately: true })
      yield* Effect.yieldNow
      assert.isUndefined(waiting.pollUnsafe())
      assert.isTrue(output.offerUnsafe(3))
      assert.isTrue(output.offerUnsafe(4))
      assert.deepStrictEqual([...(yield* Fiber.join(waiting))], [3, 4])
    }))

  it.effect("is bounded: a full output refuses offerUnsafe, and waiting offers are queued in order by the next take", () =>
    Effect.gen(function* () {
      const output = yield* RunOutput.make<number>(2)
      assert.isTrue(output.offerUnsafe(1))
      assert.isTrue(output.offerUnsafe(2))
      assert.isFalse(output.offerUnsafe(3))
      const third = yield* Effect.forkChild(output.offer(3), { startImmediately: true })
      const fourth = yield* Effect.forkChild(output.offer(4), { startImmediately: true })
      const fifth = yield* Effect.forkChild(output.offer(5), { startImmediately: true })
      yield* Effect.yieldNow
      assert.isUndefined(third.pollUnsafe())
      // An offer waits while earlier ones do, even with room: nothing overtakes them.
      assert.deepStrictEqual([...(yield* output.takeAll)], [1, 2])
      yield* Fiber.join(third)
      yield* Fiber.join(fourth)
      assert.isUndefined(fifth.pollUnsafe())
      assert.isFalse(output.offerUnsafe(6))
      assert.deepStrictEqual([...(yield* output.takeAll)], [3, 4])
      yield* Fiber.join(fifth)
      assert.deepStrictEqual([...(yield* output.takeAll)], [5])
    }))

  it.effect("after end, what is queued is still taken, then takeAll fails with Done; later offers are dropped", () =>
    Effect.gen(function* () {
      const output = yield* RunOutput.make<number>(2)
      output.offerUnsafe(1)
      yield* output.end
      assert.isFalse(output.offerUnsafe(2))
      yield* output.offer(3)
      assert.deepStrictEqual([...(yield* output.takeAll)], [1])
      const after = yield* Effect.exit(output.takeAll)
      assert.isTrue(Exit.isFailure(after) && Cause.isDone(Cause.squash(after.cause)))
      // A take waiting at the end fails with Done too.
      const other = yield* RunOutput.make<number>(2)
      const waiting = yield* Effect.forkChild(Effect.exit(other.takeAll), { startImmediately: true })
      yield* Effect.yieldNow
      yield* other.end
      const ended = yield* Fiber.join(waiting)
      assert.isTrue(Exit.isFailure(ended) && Cause.isDone(Cause.squash(ended.cause)))
    }))

  it.effect("an interrupted take or offer leaves nothing behind", () =>
    Effect.gen(function* () {
      const output = yield* RunOutput.make<number>(1)
      const take = yield* Effect.forkChild(output.takeAll, { startImmediately: true })
      yield* Effect.yieldNow
      yield* Fiber.interrupt(take)
      output.offerUnsafe(1)
      const offer = yield* Effect.forkChild(output.offer(2), { startImmediately: true })
      yield* Effect.yieldNow
      yield* Fiber.interrupt(offer)
      assert.deepStrictEqual([...(yield* output.takeAll)], [1])
      assert.isTrue(output.offerUnsafe(3))
      assert.deepStrictEqual([...(yield* output.takeAll)], [3])
    }))

  it.effect("reuses its two arrays: a batch stays as handed over until the consumer's next take", () =>
    Effect.gen(function* () {
      const output = yield* RunOutput.make<string>(8)
      output.offerUnsafe("a")
      const first = yield* output.takeAll
      output.offerUnsafe("b")
      assert.deepStrictEqual([...first], ["a"])
      const second = yield* output.takeAll
      assert.notStrictEqual(second, first)
      output.offerUnsafe("c")
      const third = yield* output.takeAll
      // The first array again, filled anew; the second was emptied by this take, to be filled next.
      assert.strictEqual(third, first)
      assert.deepStrictEqual([...third], ["c"])
      assert.deepStrictEqual([...second], [])
    }))
})
