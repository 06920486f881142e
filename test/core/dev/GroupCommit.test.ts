/**
 * Group commit of journal appends (src/core/dev/GroupCommit.ts, docs/store.md "Group commit"): appends of
 * different Turns share one transaction, an acknowledgement never precedes the commit of its batch, a failing
 * batch fails only the write that fails alone, and a failed write retried by DurableWrites lands in a later batch.
 * Real SQLite (in memory) underneath; the commit is wrapped to hold it open or make it fail.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Layer, Option, Ref } from "effect"
import { TestClock } from "effect/testing"
import { SqlClient } from "effect/sql"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import { makeDurable } from "../../../src/core/dev/DurableWrites.js"
import type { LeaseLost } from "../../../src/core/dev/pg/OwnerLeases.js"
import * as GroupCommit from "../../../src/core/dev/GroupCommit.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import { StoreFailed } from "../../../src/core/dev/StoreErrors.js"
import { commitJournal, type JournalWrite, TurnStore } from "../../../src/core/dev/TurnStore.js"
import { Ids, MessageInput } from "../../../src/proto/index.js"
import { yieldTimes } from "../../support/coreFakeSession.js"

/** These appends carry no fence (one node): a `LeaseLost` cannot happen. */
const unfenced = <A>(write: Effect.Effect<A, StoreFailed | LeaseLost>): Effect.Effect<A, StoreFailed> =>
  Effect.catchTag(write, "LeaseLost", (lost) => Effect.die(lost))

const memory = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))

const twoTurns = Effect.gen(function* () {
  yield* (yield* SessionStore).create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  yield* (yield* SessionStore).create({ sessionId: "s2", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  const turns = yield* TurnStore
  yield* turns.create({ turnId: "tA", sessionId: "s1", runId: Ids.unsafeMake.runId("run-a"), input: MessageInput.text("a") })
  yield* turns.create({ turnId: "tB", sessionId: "s2", runId: Ids.unsafeMake.runId("run-b"), input: MessageInput.text("b") })
})

const append = (turnId: string, seq: number): JournalWrite => ({
  turnId,
  events: [{ seq, attempt: 1, kind: "frame", type: "delta", bodyJson: `{"n":${seq}}` }]
})

const storedSeqs = (turnId: string) =>
  Effect.gen(function* () {
    const events = yield* (yield* TurnStore).events(turnId, 0)
    return events.map((e) => e.seq)
  })

/** A group committer over the real journal commit that records each batch's Turns before committing it. */
const recorded = (before: (writes: ReadonlyArray<JournalWrite>) => Effect.Effect<void, StoreFailed>, maxBatch?: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const batches = yield* Ref.make<ReadonlyArray<ReadonlyArray<string>>>([])
    const commit = commitJournal(sql)
    const committer = yield* GroupCommit.make(
      (writes: ReadonlyArray<JournalWrite>) =>
        Ref.update(batches, (b) => [...b, writes.map((w) => `${w.turnId}:${w.events[0]?.seq ?? "row"}`)]).pipe(
          Effect.andThen(before(writes)),
          Effect.andThen(commit(writes))
        ),
      maxBatch === undefined ? {} : { maxBatch }
    )
    return { committer, batches }
  })

describe("GroupCommit", () => {
  it.effect("appends of two Turns share one transaction, and neither is acknowledged before it commits", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const gate = yield* Deferred.make<void>()
      const { batches, committer } = yield* recorded(() => Deferred.await(gate))
      const a = yield* Effect.forkChild(committer.submit(append("tA", 1)))
      const b = yield* Effect.forkChild(committer.submit(append("tB", 1)))
      yield* yieldTimes(20)
      // The batch holding both is being committed (held open): no acknowledgement yet, nothing stored yet.
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tB:1"]])
      assert.isTrue(a.pollUnsafe() === undefined)
      assert.isTrue(b.pollUnsafe() === undefined)
      assert.deepStrictEqual(yield* storedSeqs("tA"), [])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(a)
      yield* Fiber.join(b)
      assert.deepStrictEqual(yield* storedSeqs("tA"), [1])
      assert.deepStrictEqual(yield* storedSeqs("tB"), [1])
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tB:1"]])
    }).pipe(Effect.provide(memory)))

  it.effect("through TurnStore: concurrent appendEvents of several Turns are acknowledged after their rows are stored", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const turns = yield* TurnStore
      yield* Effect.all([
        turns.appendEvents("tA", [{ seq: 1, attempt: 1, kind: "frame", type: "delta", bodyJson: "{}" }]),
        turns.appendEvents("tB", [{ seq: 1, attempt: 1, kind: "frame", type: "delta", bodyJson: "{}" }]),
        turns.appendEvents("tA", []),
        turns.appendEvent("tB", { seq: 2, attempt: 1, kind: "fact", type: "Dispatched", bodyJson: "{}" })
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(yield* storedSeqs("tA"), [1])
      assert.deepStrictEqual(yield* storedSeqs("tB"), [1, 2])
    }).pipe(Effect.provide(memory)))

  it.effect("a failing batch fails only the write that fails alone; the others are stored and acknowledged", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const { batches, committer } = yield* recorded(() => Effect.void)
      // tX does not exist: its row violates the journal's foreign key, so the batch of three fails.
      const [a, x, b] = yield* Effect.all([
        Effect.exit(committer.submit(append("tA", 1))),
        Effect.exit(committer.submit(append("tX", 1))),
        Effect.exit(committer.submit(append("tB", 1)))
      ], { concurrency: "unbounded" })
      assert.isTrue(Exit.isSuccess(a))
      assert.isTrue(Exit.isSuccess(b))
      assert.isTrue(Exit.isFailure(x))
      if (Exit.isFailure(x)) assert.instanceOf(Exit.findErrorOption(x).pipe(Option.getOrUndefined), StoreFailed)
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tX:1", "tB:1"], ["tA:1"], ["tX:1"], ["tB:1"]])
      assert.deepStrictEqual(yield* storedSeqs("tA"), [1])
      assert.deepStrictEqual(yield* storedSeqs("tB"), [1])
    }).pipe(Effect.provide(memory)))

  it.effect("a failed commit is not acknowledged; DurableWrites retries the write into a later batch (TestClock)", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const failures = yield* Ref.make(2) // the batch, then tA alone; later commits succeed
      const { batches, committer } = yield* recorded(() =>
        Ref.modify(failures, (n) => [n, Math.max(0, n - 1)] as const).pipe(
          Effect.flatMap((n) => n > 0 ? Effect.fail(new StoreFailed({ operation: "append_event" })) : Effect.void)
        ))
      const durable = makeDurable({ storeRetryDelay: "100 millis" }, () => Effect.void)
      const owner = { turnId: "tA", runId: "run-a" }
      const a = yield* Effect.forkChild(durable(owner, "journal", unfenced(committer.submit(append("tA", 1)))))
      const b = yield* Effect.forkChild(durable({ turnId: "tB", runId: "run-b" }, "journal", unfenced(committer.submit(append("tB", 1)))))
      // tB commits alone after the batch failed (no clock needed: joined, since the store answers from its worker
      // thread); tA failed alone and waits for its retry.
      yield* Fiber.join(b)
      assert.isTrue(a.pollUnsafe() === undefined)
      assert.deepStrictEqual(yield* storedSeqs("tA"), [])
      yield* TestClock.adjust("99 millis")
      yield* yieldTimes(20)
      assert.isTrue(a.pollUnsafe() === undefined)
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(a)
      assert.deepStrictEqual(yield* storedSeqs("tA"), [1])
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tB:1"], ["tA:1"], ["tB:1"], ["tA:1"]])
    }).pipe(Effect.provide(memory)))

  it.effect("a store that refuses every commit fails every waiter of the batch, and none is acknowledged before", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const gate = yield* Deferred.make<void>()
      const { batches, committer } = yield* recorded(() =>
        Deferred.await(gate).pipe(Effect.andThen(Effect.fail(new StoreFailed({ operation: "append_event" })))))
      const fibers = yield* Effect.forEach(
        [append("tA", 1), append("tB", 1), append("tA", 2)],
        (write) => Effect.forkChild(Effect.exit(committer.submit(write)))
      )
      yield* yieldTimes(20)
      // The batch of three is being committed (held open): nobody is acknowledged.
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tB:1", "tA:2"]])
      assert.isTrue(fibers.every((fiber) => fiber.pollUnsafe() === undefined))
      yield* Deferred.succeed(gate, undefined)
      const exits = yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(exits, [1, 2, 3].map(() => Exit.fail(new StoreFailed({ operation: "append_event" }))))
      // The batch, then each write alone; all refused, nothing stored.
      assert.deepStrictEqual(yield* Ref.get(batches), [["tA:1", "tB:1", "tA:2"], ["tA:1"], ["tB:1"], ["tA:2"]])
      assert.deepStrictEqual(yield* storedSeqs("tA"), [])
      assert.deepStrictEqual(yield* storedSeqs("tB"), [])
    }).pipe(Effect.provide(memory)))

  it.effect("flushes on size: more writes than maxBatch queued at once go in batches of at most maxBatch", () =>
    Effect.gen(function* () {
      yield* twoTurns
      const { batches, committer } = yield* recorded(() => Effect.void, 4)
      yield* Effect.forEach([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], (seq) => committer.submit(append("tA", seq)), { concurrency: "unbounded" })
      const sizes = (yield* Ref.get(batches)).map((b) => b.length)
      assert.isTrue(sizes.every((n) => n <= 4), `batch sizes ${sizes.join(",")}`)
      assert.strictEqual(sizes.reduce((x, y) => x + y, 0), 10)
      assert.isTrue(sizes.length <= 4, `batch sizes ${sizes.join(",")}`)
      assert.deepStrictEqual(yield* storedSeqs("tA"), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    }).pipe(Effect.provide(memory)))

  it.effect("a Turn's row queued with enqueue and its first append commit in one transaction, the row first; its wait ends at the commit", () =>
    Effect.gen(function* () {
      yield* twoTurns
      yield* (yield* DeviceStore).issueCredential("dev-1")
      const sql = yield* SqlClient.SqlClient
      const gate = yield* Deferred.make<void>()
      const { batches, committer } = yield* recorded(() => Deferred.await(gate))
      // The row as TurnCreate writes it, then the append that begins its attempt (Turns.ts launches the runner between).
      const row = sql`INSERT INTO turns (turn_id, session_id, run_id, device_id, status, attempt, input_json, input_cursor, created_at_ms)
        VALUES ('tN', 's1', 'run-n', NULL, 'queued', 0, '[]', 0, 0)`
      const created = yield* committer.enqueue({ turnId: "tN", events: [], statements: [row] })
      const waiting = yield* Effect.forkChild(created)
      const first = yield* Effect.forkChild(committer.submit({ ...append("tN", 1), begin: { deviceId: "dev-1" } }))
      yield* yieldTimes(20)
      assert.isUndefined(waiting.pollUnsafe()) // not acknowledged before its commit
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(waiting)
      yield* Fiber.join(first)
      // One batch, committed once: without the row before the journal rows, the batch fails and each write commits alone.
      assert.deepStrictEqual(yield* Ref.get(batches), [["tN:row", "tN:1"]])
      assert.deepStrictEqual(yield* storedSeqs("tN"), [1])
      const turn = Option.getOrThrow(yield* (yield* TurnStore).get("tN"))
      assert.deepStrictEqual([turn.status, turn.attempt, turn.deviceId], ["running", 1, "dev-1"])
    }).pipe(Effect.provide(memory)))

  it.effect("a batch is timed by the committer's own clock, read once per batch (no Clock effect per write)", () =>
    Effect.gen(function* () {
      const opened = yield* Ref.make<ReadonlyArray<bigint>>([])
      const committer = yield* GroupCommit.make((_: ReadonlyArray<number>, info) => Ref.update(opened, (o) => [...o, info.openedAtNanos]))
      yield* TestClock.adjust("5 millis")
      // A caller under another clock: the batch still takes the committer's time (its `openedAtNanos` and the
      // commit-latency metric read one clock).
      const elsewhere: Clock.Clock = { ...(yield* Clock.Clock), currentTimeNanosUnsafe: () => 999n }
      yield* Effect.forEach([1, 2, 3], (n) => committer.submit(n), { concurrency: "unbounded" }).pipe(
        Effect.provideService(Clock.Clock, elsewhere)
      )
      assert.deepStrictEqual(yield* Ref.get(opened), [5_000_000n])
    }))
})
