/**
 * Trace handling both sides share (protocol "Envelope", `trace`): a reply echoes only a valid traceparent,
 * a received valid trace becomes the parent of the handler's span, a missing or malformed one gives a local
 * span, and an outgoing frame carries the current span as a traceparent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import { Trace } from "../../src/proto/index.js"

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
const SPAN_ID = "00f067aa0ba902b7"
const valid = `00-${TRACE_ID}-${SPAN_ID}-01`
const malformed = [
  "",
  "not a traceparent",
  valid.toUpperCase(),
  `${valid}-extra`,
  `00-${"0".repeat(32)}-${SPAN_ID}-01`,
  `ff-${TRACE_ID}-${SPAN_ID}-01`,
  `01-${TRACE_ID}-${SPAN_ID}-01-${"x".repeat(256)}`,
  "t".repeat(256)
]

/** The span the handler runs in, and its parent. */
const observed = Effect.gen(function* () {
  const span = yield* Effect.currentSpan
  return { span, parent: Option.getOrUndefined(span.parent) }
})

describe("Trace.echo", () => {
  it("returns a valid traceparent unchanged, including a future version with appended fields", () => {
    assert.strictEqual(Trace.echo(valid), valid)
    assert.strictEqual(Trace.echo(`00-${TRACE_ID}-${SPAN_ID}-00`), `00-${TRACE_ID}-${SPAN_ID}-00`)
    const future = `01-${TRACE_ID}-${SPAN_ID}-01-extra`
    assert.strictEqual(Trace.echo(future), future)
  })

  it("never echoes a missing, malformed or oversized value (echoable would have echoed the short ones)", () => {
    assert.strictEqual(Trace.echo(undefined), undefined)
    for (const value of malformed) {
      assert.strictEqual(Trace.echo(value), undefined, value.slice(0, 40))
    }
    // The difference from the older helper, which only bounds the length:
    assert.strictEqual(Trace.echoable("not a traceparent"), "not a traceparent")
    assert.strictEqual(Trace.echo("not a traceparent"), undefined)
  })

  it("does not throw on a non-string value read from an untyped source", () => {
    for (const value of [null, 42, { traceparent: valid }]) {
      assert.strictEqual(Trace.echo(value as unknown as string), undefined)
    }
  })
})

describe("Trace.parentOf", () => {
  it("gives the sender's span as an external span, or None", () => {
    const parent = Trace.parentOf(valid)
    assert.isTrue(Option.isSome(parent))
    const span = Option.getOrThrow(parent)
    assert.strictEqual(span._tag, "ExternalSpan")
    assert.strictEqual(span.traceId, TRACE_ID)
    assert.strictEqual(span.spanId, SPAN_ID)
    assert.strictEqual(span.sampled, true)
    assert.strictEqual(Option.getOrThrow(Trace.parentOf(`00-${TRACE_ID}-${SPAN_ID}-00`)).sampled, false)
    for (const value of [undefined, ...malformed]) {
      assert.deepStrictEqual(Trace.parentOf(value), Option.none())
    }
  })

  it("answers each value by itself when values repeat and alternate (its one-entry memo is never stale)", () => {
    const other = `00-${TRACE_ID}-1111111111111111-00`
    for (let i = 0; i < 3; i++) {
      assert.strictEqual(Option.getOrThrow(Trace.parentOf(valid)).spanId, SPAN_ID)
      assert.strictEqual(Option.getOrThrow(Trace.parentOf(valid)).spanId, SPAN_ID)
      const second = Option.getOrThrow(Trace.parentOf(other))
      assert.deepStrictEqual([second.spanId, second.sampled], ["1111111111111111", false])
      assert.deepStrictEqual(Trace.parentOf(malformed[0]), Option.none())
      assert.deepStrictEqual(Trace.parentOf(undefined), Option.none())
    }
  })
})

describe("Trace.withReceivedTrace", () => {
  it.effect("continues the sender's trace when the received trace is valid", () =>
    Effect.gen(function* () {
      const { span, parent } = yield* observed.pipe(Trace.withReceivedTrace("Dispatcher.prompt_request", valid))
      assert.strictEqual(span.name, "Dispatcher.prompt_request")
      assert.strictEqual(span.traceId, TRACE_ID)
      assert.notStrictEqual(span.spanId, SPAN_ID)
      assert.strictEqual(parent?._tag, "ExternalSpan")
      assert.strictEqual(parent?.spanId, SPAN_ID)
    }))

  it.effect("takes the sender's span over an enclosing local span (data-first form, with options)", () =>
    Effect.gen(function* () {
      const { span, parent } = yield* Trace.withReceivedTrace(observed, "handle", valid, { attributes: { type: "steer" } }).pipe(
        Effect.withSpan("connection")
      )
      assert.strictEqual(span.traceId, TRACE_ID)
      assert.strictEqual(parent?.spanId, SPAN_ID)
      assert.strictEqual(span.attributes.get("type"), "steer")
    }))

  it.effect("starts a local trace for a missing or malformed trace and never adopts its ids", () =>
    Effect.gen(function* () {
      for (const value of [undefined, ...malformed, `00-${TRACE_ID}-${SPAN_ID}-01-extra`]) {
        const { span, parent } = yield* observed.pipe(Trace.withReceivedTrace("handle", value))
        assert.strictEqual(parent, undefined, String(value).slice(0, 40))
        assert.notStrictEqual(span.traceId, TRACE_ID)
        assert.isTrue(/^[0-9a-f]{32}$/.test(span.traceId))
      }
    }))

  it.effect("nests a handler with a malformed trace under the enclosing local span", () =>
    Effect.gen(function* () {
      const { span, parent } = yield* observed.pipe(Trace.withReceivedTrace("handle", "garbage"), Effect.withSpan("connection"))
      assert.strictEqual(parent?._tag, "Span")
      assert.strictEqual((parent as Tracer.Span).name, "connection")
      assert.strictEqual(span.traceId, parent?.traceId)
    }))

  it.effect("leaves the handler's success and failure untouched", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* Effect.succeed(7).pipe(Trace.withReceivedTrace("h", "garbage")), 7)
      const failed = yield* Effect.fail("refused" as const).pipe(Trace.withReceivedTrace("h", valid), Effect.flip)
      assert.strictEqual(failed, "refused")
    }))
})

describe("Trace.currentTraceparent", () => {
  it.effect("is undefined outside any span", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* Trace.currentTraceparent, undefined)
    }))

  it.effect("formats the current span, which continues a received trace", () =>
    Effect.gen(function* () {
      const [traceparent, span] = yield* Effect.all([Trace.currentTraceparent, Effect.currentSpan]).pipe(
        Trace.withReceivedTrace("Delivery.dispatch", valid)
      )
      assert.strictEqual(traceparent, `00-${TRACE_ID}-${span.spanId}-01`)
      assert.deepStrictEqual(Trace.parseTraceparent(traceparent), Option.some({ traceId: TRACE_ID, spanId: span.spanId, sampled: true }))
    }))

  it.effect("formats a local span as a valid traceparent that the peer can parse", () =>
    Effect.gen(function* () {
      const traceparent = yield* Trace.currentTraceparent.pipe(Effect.withSpan("local"))
      assert.isTrue(Option.isSome(Trace.parseTraceparent(traceparent)), traceparent)
    }))

  it.effect("formats an adopted external parent, and gives undefined for ids that are not W3C-shaped", () =>
    Effect.gen(function* () {
      const adopted = yield* Trace.currentTraceparent.pipe(
        Effect.withParentSpan(Tracer.externalSpan({ traceId: TRACE_ID, spanId: SPAN_ID, sampled: false }))
      )
      assert.strictEqual(adopted, `00-${TRACE_ID}-${SPAN_ID}-00`)
      const foreign = yield* Trace.currentTraceparent.pipe(
        Effect.withParentSpan(Tracer.externalSpan({ traceId: "trace-456", spanId: "span-123" }))
      )
      assert.strictEqual(foreign, undefined)
    }))
})
