/**
 * The operator SSE format: readable fact names, and the keep-alive comment at its interval on TestClock
 * (none just before the interval, one just after, written beside the events; none once the events end).
 */
import { assert, describe, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Queue, Ref, Stream } from "effect"
import { TestClock } from "effect/testing"
import { KeepAliveComment, readableFact, snakeCase, withKeepAlive } from "../../../src/core/dev/OperatorSse.js"

describe("OperatorSse", () => {
  it("names facts in snake_case under `fact`, keeps the other fields, and leaves anything else as it was", () => {
    assert.strictEqual(snakeCase("InputAccepted"), "input_accepted")
    assert.strictEqual(snakeCase("CancelUnconfirmed"), "cancel_unconfirmed")
    assert.strictEqual(snakeCase("RunObservationEnded"), "run_observation_ended")
    assert.strictEqual(
      readableFact(JSON.stringify({ _tag: "InputAccepted", input_id: "in-1", position: 1 })),
      JSON.stringify({ fact: "input_accepted", input_id: "in-1", position: 1 })
    )
    for (const raw of ["not json", "[1,2]", "\"text\"", "{\"a\":1}", "{\"_tag\":3}"]) assert.strictEqual(readableFact(raw), raw)
  })

  it.effect("writes a keep-alive comment beside the events every interval while they are open, and stops with them", () =>
    Effect.gen(function* () {
      const source = yield* Queue.unbounded<string, Cause.Done>()
      const seen = yield* Ref.make<ReadonlyArray<string>>([])
      const written: Array<string> = []
      const fiber = yield* withKeepAlive(Stream.fromQueue(source), (comment) => written.push(comment), "15 seconds").pipe(
        Stream.runForEach((text) => Ref.update(seen, (all) => [...all, text])),
        Effect.forkChild
      )
      yield* Queue.offer(source, "event: frame\n\n")
      yield* TestClock.adjust("14999 millis")
      assert.deepStrictEqual(yield* Ref.get(seen), ["event: frame\n\n"])
      assert.deepStrictEqual(written, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(written, [KeepAliveComment])
      yield* TestClock.adjust("15 seconds")
      assert.strictEqual(written.length, 2)
      // The events themselves pass unchanged; the comments never go through the stream.
      assert.deepStrictEqual(yield* Ref.get(seen), ["event: frame\n\n"])
      yield* Queue.end(source)
      yield* Fiber.join(fiber)
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(written.length, 2)
    }))
})
