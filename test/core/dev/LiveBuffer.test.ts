/**
 * LiveBuffer: the live source is drained at once (it never waits for the reader), a reader gets every item in
 * order while the buffered weight stays at or below the bound, and is dropped with `FollowerLagging` one unit past it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, PubSub, Ref, Scope, Stream } from "effect"
import { FollowerLagging, make, makeSink } from "../../../src/core/dev/LiveBuffer.js"

/** A hub with one subscriber buffered through LiveBuffer; `n` items of weight 1 published before the reader reads. */
const publishedBeforeReading = (n: number, maxWeight: number) =>
  Effect.gen(function* () {
    const hub = yield* PubSub.unbounded<number>()
    const subscription = yield* PubSub.subscribe(hub)
    const dropped = yield* Ref.make(false)
    const reader = yield* make(
      Stream.fromSubscription(subscription).pipe(Stream.takeUntil((i) => i === 0)),
      () => 1,
      maxWeight,
      Ref.set(dropped, true)
    )
    for (let i = 1; i <= n; i++) yield* PubSub.publish(hub, i)
    yield* PubSub.publish(hub, 0) // the end marker (weight 1 too)
    yield* Effect.yieldNow
    // `onLagging` ran from the draining side, before the reader pulled anything.
    const droppedBeforeReading = yield* Ref.get(dropped)
    return { exit: yield* Effect.exit(Stream.runCollect(reader)), droppedBeforeReading }
  }).pipe(Effect.scoped)

describe("LiveBuffer", () => {
  it.effect("hands every item to the reader in order while the buffered weight stays at the bound", () =>
    Effect.gen(function* () {
      const { droppedBeforeReading, exit } = yield* publishedBeforeReading(99, 100)
      assert.isFalse(droppedBeforeReading)
      assert.isTrue(Exit.isSuccess(exit))
      if (Exit.isSuccess(exit)) assert.deepStrictEqual(exit.value, [...Array.from({ length: 99 }, (_, i) => i + 1), 0])
    }))

  it.effect("drops a reader one unit past the bound, after the items already buffered", () =>
    Effect.gen(function* () {
      const { droppedBeforeReading, exit } = yield* publishedBeforeReading(100, 100)
      assert.isTrue(droppedBeforeReading)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const reason = exit.cause.reasons[0]
        assert.isTrue(reason?._tag === "Fail" && reason.error instanceof FollowerLagging)
      }
    }))

  it.effect("drains the source without waiting for the reader (the publisher never blocks, the hub keeps nothing)", () =>
    Effect.gen(function* () {
      const hub = yield* PubSub.bounded<number>(4)
      const subscription = yield* PubSub.subscribe(hub)
      const reader = yield* make(Stream.fromSubscription(subscription).pipe(Stream.takeUntil((i) => i === 0)), () => 1, 50)
      // A bounded hub suspends its publisher once its subscriber holds 4 unread items: the buffer takes them.
      for (let i = 1; i <= 40; i++) yield* PubSub.publish(hub, i)
      yield* PubSub.publish(hub, 0)
      yield* Effect.yieldNow
      assert.strictEqual(yield* PubSub.size(hub), 0)
      assert.strictEqual((yield* Stream.runCollect(reader)).length, 41)
    }).pipe(Effect.scoped))

  it.effect("a sink buffers each offer in the publisher's own step, ends after the last item, and drops a reader past the bound", () =>
    Effect.gen(function* () {
      const dropped = yield* Ref.make(false)
      const ending = yield* makeSink<number>(() => 1, 3, (i) => i === 0)
      // No fiber runs between the offers and the read: the items are in the reader's buffer already.
      for (const i of [1, 2, 0, 4]) ending.sink.offer(i)
      assert.isFalse(ending.sink.open())
      assert.deepStrictEqual(yield* Stream.runCollect(ending.stream), [1, 2, 0])
      const lagging = yield* makeSink<number>(() => 1, 3, () => false, Ref.set(dropped, true))
      for (const i of [1, 2, 3, 4, 5]) lagging.sink.offer(i)
      assert.isFalse(lagging.sink.open())
      yield* Effect.yieldNow
      // `onLagging` ran from the publisher's side, before the reader pulled anything.
      assert.isTrue(yield* Ref.get(dropped))
      const exit = yield* Effect.exit(Stream.runCollect(lagging.stream))
      assert.deepStrictEqual(exit, Exit.fail(new FollowerLagging({ maxWeight: 3 })))
    }).pipe(Effect.scoped))

  it.effect("a sink with onLagging starts no fiber until its reader falls behind; the one it starts belongs to its scope", () =>
    Effect.gen(function* () {
      // Fiber ids are sequential: a probe forked before and after tells whether anything forked in between.
      const probe = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id)
      const dropped = yield* Ref.make(0)
      const before = yield* probe
      const following = yield* makeSink<number>(() => 1, 2, () => false, Ref.update(dropped, (n) => n + 1))
      for (const i of [1, 2]) following.sink.offer(i)
      assert.strictEqual(yield* probe, before + 1)
      following.sink.offer(3)
      yield* Effect.yieldNow
      assert.strictEqual(yield* Ref.get(dropped), 1)
      // Once dropped, later offers run nothing more.
      following.sink.offer(4)
      yield* Effect.yieldNow
      assert.strictEqual(yield* Ref.get(dropped), 1)
      // A reader dropped after its scope closed runs nothing: the fiber is interrupted with the scope.
      const scope = yield* Scope.make()
      const late = yield* makeSink<number>(() => 1, 1, () => false, Ref.update(dropped, (n) => n + 10)).pipe(Scope.provide(scope))
      yield* Scope.close(scope, Exit.void)
      late.sink.offer(1)
      late.sink.offer(2)
      yield* Effect.yieldNow
      assert.strictEqual(yield* Ref.get(dropped), 1)
    }).pipe(Effect.scoped))
})
