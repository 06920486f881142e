/**
 * Each admission holds its capacity permit in its own scope (issue #12): a child of its Executor's scope,
 * acquired with `acquireRelease` and returned only by closing that scope — when the Executor goes back to the
 * idle pool, or after its close was confirmed. Closing or cleanup-unconfirmed Executors keep counting.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Result, Scope } from "effect"
import { TestClock } from "effect/testing"
import type { ExecutorId } from "../../src/proto/Ids.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { makeCapacityPermits } from "../../src/runtime/CapacityPermits.js"
import { type ExecutorEntry, makeWith, type ReserveSpec } from "../../src/runtime/Executors.js"
import { CloseFailed, type Executor, type Harness } from "../../src/runtime/harness/Harness.js"
import { scriptedDeclaration } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { Ownership } from "../../src/runtime/Ownership.js"
import { RuntimePolicy } from "../../src/runtime/RuntimePolicy.js"
import { preparedConfiguration, same, settle } from "../support/runtimeTestWire.js"

const layer = Layer.mergeAll(Ownership.layer, RuntimePolicy.layer({ maxActive: 1 }))

const spec = (session: string): ReserveSpec => ({
  sessionId: unsafeMake.sessionId(session),
  kind: "scripted",
  declaration: scriptedDeclaration(),
  configuration: preparedConfiguration(),
  configFingerprint: "fp",
  retained: true,
  readOnly: false
})

/** A Harness whose Executors' close fails `failures.count` times before it confirms. */
const harness = (failures: { count: number }): Harness => ({
  declaration: scriptedDeclaration(),
  prepare: () =>
    Effect.succeed<Executor>({
      startTurn: () => Effect.die("unused"),
      nativeSessionId: Effect.succeed(Option.none()),
      close: Effect.suspend(() => failures.count-- > 0 ? Effect.fail(new CloseFailed({ reason: "stuck" })) : Effect.void)
    })
})

const id = (n: number) => `executor-${n}` as ExecutorId

const prepared = (executors: Effect.Success<ReturnType<typeof makeWith>>, n: number, session: string, failures = { count: 0 }) =>
  Effect.gen(function* () {
    const reserved = yield* executors.reserve(id(n), spec(session))
    assert.isTrue(Result.isSuccess(reserved))
    const entry = (reserved as Result.Success<ExecutorEntry, never>).success
    yield* executors.prepare(entry, harness(failures), {
      executorId: entry.id, sessionId: entry.sessionId, configuration: entry.configuration, declaration: entry.declaration
    })
    return entry
  })

describe("capacity permits", () => {
  it.effect("a permit lives only in its scope: closing the scope is the one way it returns", () =>
    Effect.gen(function* () {
      const permits = makeCapacityPermits(1)
      const a = yield* Scope.make()
      const b = yield* Scope.make()
      assert.isTrue(yield* permits.acquire(a))
      assert.isFalse(yield* permits.acquire(b))
      assert.strictEqual(permits.inUse(), 1)
      yield* permits.acquireBeyond(b)
      assert.strictEqual(permits.inUse(), 2)
      yield* Scope.close(a, Exit.void)
      assert.strictEqual(permits.inUse(), 1)
      yield* Scope.close(b, Exit.void)
      assert.strictEqual(permits.inUse(), 0)
    }))

  it.effect("each admission holds its permit in its own scope; going idle returns it, a reuse takes a new one", () =>
    Effect.gen(function* () {
      const executors = yield* makeWith({})
      const first = yield* prepared(executors, 1, "session-a")
      const held = first.permit
      assert.isDefined(held)
      same(yield* executors.reserve(id(2), spec("session-b")), Result.fail("preparation_capacity"))
      // The admission's ownership ended, the Executor is healthy: its permit scope closes; the Executor stays.
      yield* executors.toIdle(first)
      assert.isUndefined(first.permit)
      same(yield* executors.counts, { active: 0, idle: 1 })
      const second = yield* prepared(executors, 2, "session-b")
      same(yield* executors.admitIdle(first), Result.fail("preparation_capacity"))
      yield* executors.toIdle(second)
      same(yield* executors.admitIdle(first), Result.void)
      assert.isDefined(first.permit)
      assert.notStrictEqual(first.permit, held)
      same(yield* executors.counts, { active: 1, idle: 1 })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("a closing Executor keeps its permit until the close is confirmed, retried at 500 ms and 1.25 s", () =>
    Effect.gen(function* () {
      const executors = yield* makeWith({})
      const entry = yield* prepared(executors, 1, "session-a", { count: 2 })
      yield* executors.closeInBackground(entry)
      yield* settle
      same(yield* executors.counts, { active: 1, idle: 0 })
      same(yield* executors.reserve(id(2), spec("session-b")), Result.fail("preparation_capacity"))
      yield* TestClock.adjust(1_249)
      same(yield* executors.reserve(id(2), spec("session-b")), Result.fail("preparation_capacity"))
      yield* TestClock.adjust(1)
      yield* settle
      same(yield* executors.counts, { active: 0, idle: 0 })
      assert.isTrue(Result.isSuccess(yield* executors.reserve(id(2), spec("session-b"))))
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.effect("an idle Executor that starts closing counts as active again until its close is confirmed", () =>
    Effect.gen(function* () {
      const executors = yield* makeWith({})
      const idle = yield* prepared(executors, 1, "session-a", { count: 1 })
      yield* executors.toIdle(idle)
      same(yield* executors.counts, { active: 0, idle: 1 })
      yield* executors.closeInBackground(idle)
      yield* settle
      assert.isDefined(idle.permit)
      same(yield* executors.counts, { active: 1, idle: 0 })
      same(yield* executors.reserve(id(2), spec("session-b")), Result.fail("preparation_capacity"))
      yield* TestClock.adjust(500)
      yield* settle
      same(yield* executors.counts, { active: 0, idle: 0 })
    }).pipe(Effect.scoped, Effect.provide(layer)))
})
