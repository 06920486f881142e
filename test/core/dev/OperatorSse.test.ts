/**
 * The operator SSE format: readable fact names, and the keep-alive comment at its interval on TestClock
 * (none just before the interval, one just after, written beside the events; none once the events end; one ticker
 * for every stream, no fiber per stream); the event
 * writer (one write per ready batch, a wait for `drain` on a full socket buffer, the error event on a failure).
 */
import { assert, describe, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Queue, Ref, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { TestClock } from "effect/testing"
import { EventEmitter } from "node:events"
import type { JournalItem } from "../../../src/core/dev/JournalItem.js"
import { KeepAliveComment, makeKeepAlive, readableFact, snakeCase, sseEvent, writeEvents } from "../../../src/core/dev/OperatorSse.js"
import * as Outcome from "../../../src/core/Outcome.js"

/** `readableFact` as it was before the head was swapped as text (parse, copy without `_tag`, stringify). */
const readableFactReference = (bodyJson: string): string => {
  let parsed: unknown
  try {
    parsed = JSON.parse(bodyJson)
  } catch {
    return bodyJson
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return bodyJson
  const { _tag, ...rest } = parsed as { readonly _tag?: unknown }
  if (typeof _tag !== "string") return bodyJson
  return JSON.stringify({ fact: snakeCase(_tag), ...rest })
}

/** Every fact kind the journal stores, with each of its fields. */
const factKinds = (Outcome.TurnFact as unknown as {
  readonly members: ReadonlyArray<{ readonly fields: Record<string, { readonly ast: { readonly literal?: unknown } }> }>
}).members.map((m) => ({ tag: String(m.fields._tag?.ast.literal), fields: Object.keys(m.fields).filter((k) => k !== "_tag") }))

/** Field values that stress serialisation: escapes, non-ASCII, lone surrogates, numbers, nested tags, odd keys. */
const samples: ReadonlyArray<unknown> = [
  "plain",
  "quote \" backslash \\ newline \n tab \t nul \u0000 del \u007f",
  "é ü 漢字 😀 \ud800 lone",
  0,
  -1.5e-7,
  12345678901234567890,
  true,
  null,
  [],
  [1, "two", { _tag: "Inner" }],
  { _tag: "Completed", detail: { "0": "index", "10": "ten", b: 1, a: 2 } },
  { "__proto__": { x: 1 }, "constructor": "c", toJSON: "not a function" }
]

const storedFacts = (): ReadonlyArray<string> =>
  factKinds.flatMap(({ tag, fields }) =>
    samples.map((_, i) => JSON.stringify(Object.fromEntries([["_tag", tag], ...fields.map((f, j) => [f, samples[(i + j) % samples.length]])])))
      .concat(JSON.stringify({ _tag: tag }))
  )

/** A Node response double: records each write; `full` makes `write` answer false (the socket's buffer is full). */
const responseDouble = () => {
  const emitter = new EventEmitter()
  const writes: Array<string> = []
  const double = Object.assign(emitter, {
    full: false,
    writableEnded: false,
    destroyed: false,
    /** How many writes had been made at each `cork` call of the socket. */
    corkedAt: [] as Array<number>,
    socket: {
      cork: () => {
        double.corkedAt.push(writes.length)
      }
    },
    write: (text: string) => {
      writes.push(text)
      return !double.full
    }
  })
  // The shape `NodeHttpServerRequest.toServerResponse` reads.
  const request = { response: double } as unknown as HttpServerRequest.HttpServerRequest
  return { double, writes, request }
}

const entry = (seq: number): JournalItem => ({ _tag: "entry", seq, kind: "frame", type: "delta", bodyJson: `{"n":${seq}}` })

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

  it("renders every stored fact kind byte for byte as parse, copy and stringify did, and odd stored text too", () => {
    assert.strictEqual(factKinds.length, 15)
    const odd = [
      "{ \"_tag\" : \"InputAccepted\" , \"input_id\" : \"in-1\" }",
      "{\"_tag\":\"Input\\u0041ccepted\",\"n\":1.0,\"m\":1e2,\"z\":-0,\"s\":\"\\/\\u00e9\"}",
      "{\"_tag\":\"A\",\"x\":1,\"x\":2}",
      "{\"_tag\":\"A\",\"_tag\":\"B\"}",
      "{\"x\":1,\"_tag\":\"InputAccepted\"}",
      "{\"1\":1,\"_tag\":\"InputAccepted\",\"a\":2}",
      "{\"_tag\":\"InputAccepted\",\"2\":1}",
      "{\"__proto__\":{\"_tag\":\"Inherited\"}}",
      "{\"__proto__\":1,\"_tag\":\"X\"}",
      "{\"_tag\":\"\",\"a\":[]}",
      "{\"_tag\":\"HTTPServerError\"}",
      `{"_tag":"${"Long".repeat(40)}"}`,
      "{\"_tag\":\"X\"} trailing",
      "{}"
    ]
    const all = [...storedFacts(), ...odd]
    assert.isAbove(all.length, 15 * samples.length)
    // Twice: the first pass fills the cached heads, the second reads them.
    for (let pass = 0; pass < 2; pass++) {
      for (const body of all) assert.strictEqual(readableFact(body), readableFactReference(body), body)
    }
  })

  it.effect("writes a keep-alive comment beside the events every interval while they are open, and stops with them", () =>
    Effect.gen(function* () {
      const keepAlive = yield* makeKeepAlive("15 seconds")
      const source = yield* Queue.unbounded<string, Cause.Done>()
      const seen = yield* Ref.make<ReadonlyArray<string>>([])
      const written: Array<string> = []
      const writer = Stream.fromQueue(source).pipe(Stream.runForEach((text) => Ref.update(seen, (all) => [...all, text])))
      const fiber = yield* keepAlive.around(writer, (comment) => written.push(comment)).pipe(Effect.forkChild)
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
    }).pipe(Effect.scoped))

  it.effect("stops the keep-alive comments when the writer fails or is interrupted", () =>
    Effect.gen(function* () {
      const keepAlive = yield* makeKeepAlive("15 seconds")
      const written: Array<string> = []
      const failed = yield* keepAlive.around(Effect.andThen(Effect.sleep("20 seconds"), Effect.fail("gone")), (c) => written.push(c)).pipe(
        Effect.flip,
        Effect.forkChild
      )
      yield* TestClock.adjust("20 seconds")
      assert.strictEqual(yield* Fiber.join(failed), "gone")
      assert.strictEqual(written.length, 1)
      const interrupted = yield* keepAlive.around(Effect.never, (c) => written.push(c)).pipe(Effect.forkChild)
      yield* TestClock.adjust("15 seconds")
      assert.strictEqual(written.length, 2)
      yield* Fiber.interrupt(interrupted)
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(written.length, 2)
    }).pipe(Effect.scoped))

  it.effect("one ticker keeps every stream alive: a stream starts no fiber, each gets its comments an interval after its own start", () =>
    Effect.gen(function* () {
      const keepAlive = yield* makeKeepAlive("15 seconds")
      // Fiber ids are sequential: a probe fork before and after shows how many fibers the streams' starts made.
      const probe = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id)
      const a: Array<string> = []
      const b: Array<string> = []
      const ends = yield* Queue.unbounded<void>()
      let before = yield* probe
      const first = yield* Effect.forkChild(keepAlive.around(Queue.take(ends), (c) => a.push(c)))
      yield* Effect.yieldNow
      // The probe's own fiber and the stream's fiber (forked here), nothing inside `around`.
      assert.strictEqual((yield* probe) - before, 2)
      yield* TestClock.adjust("5 seconds")
      before = yield* probe
      const second = yield* Effect.forkChild(keepAlive.around(Queue.take(ends), (c) => b.push(c)))
      yield* Effect.yieldNow
      assert.strictEqual((yield* probe) - before, 2)
      yield* TestClock.adjust("10 seconds") // 15 s: the first is due, the second not yet
      assert.deepStrictEqual([a.length, b.length], [1, 0])
      yield* TestClock.adjust("5 seconds") // 20 s: the second, an interval after its start
      assert.deepStrictEqual([a.length, b.length], [1, 1])
      yield* TestClock.adjust("10 seconds") // 30 s: the first again
      assert.deepStrictEqual([a.length, b.length], [2, 1])
      yield* Fiber.interrupt(first)
      yield* TestClock.adjust("30 seconds") // only the second, at 35 s and 50 s
      assert.deepStrictEqual([a.length, b.length], [2, 3])
      yield* Queue.offer(ends, undefined)
      yield* Fiber.join(second)
      yield* TestClock.adjust("60 seconds")
      assert.deepStrictEqual([a.length, b.length], [2, 3])
      // Idle, the ticker waits for the next stream and keeps it alive from its start.
      const third = yield* Effect.forkChild(keepAlive.around(Queue.take(ends), (c) => a.push(c)))
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual([a.length, b.length], [3, 3])
      yield* Fiber.interrupt(third)
    }).pipe(Effect.scoped))

  it.effect("writes each ready batch of events as one write, waits for drain when the buffer is full, and ends a failed stream with the error event", () =>
    Effect.gen(function* () {
      const { double, writes, request } = responseDouble()
      const source = yield* Queue.unbounded<JournalItem, string | Cause.Done>()
      const fiber = yield* writeEvents(Stream.fromQueue(source), request, "event: error\n\n").pipe(Effect.forkChild)
      yield* Queue.offerAll(source, [entry(1), entry(2)])
      yield* Effect.yieldNow
      assert.deepStrictEqual(writes, [sseEvent(entry(1)) + sseEvent(entry(2))])
      // A full buffer: the next batch is written, then nothing more is taken until the response drains.
      double.full = true
      yield* Queue.offer(source, entry(3))
      yield* Effect.yieldNow
      yield* Queue.offer(source, entry(4))
      yield* Effect.yieldNow
      assert.deepStrictEqual(writes.slice(1), [sseEvent(entry(3))])
      double.full = false
      double.emit("drain")
      yield* Effect.yieldNow
      yield* Effect.yieldNow
      assert.deepStrictEqual(writes.slice(2), [sseEvent(entry(4))])
      yield* Queue.fail(source, "store failed")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(writes.slice(3), ["event: error\n\n"])
    }))

  it.effect("corks the socket before the outcome's write only, and does not wait for a drain after it (the server's end uncorks it)", () =>
    Effect.gen(function* () {
      const { double, writes, request } = responseDouble()
      const source = yield* Queue.unbounded<JournalItem, Cause.Done>()
      const fiber = yield* writeEvents(Stream.fromQueue(source), request, "event: error\n\n").pipe(Effect.forkChild)
      yield* Queue.offer(source, entry(1))
      yield* Effect.yieldNow
      assert.deepStrictEqual(double.corkedAt, [])
      const outcome: JournalItem = { _tag: "outcome", turn: { turnId: "t" } as unknown as Extract<JournalItem, { _tag: "outcome" }>["turn"] }
      // A full buffer at the outcome's write: the writer does not wait for a drain the corked socket never emits.
      double.full = true
      yield* Queue.offerAll(source, [entry(2), outcome])
      yield* Queue.end(source)
      yield* Fiber.join(fiber)
      assert.strictEqual(writes.length, 2)
      assert.deepStrictEqual(double.corkedAt, [1])
    }))
})
