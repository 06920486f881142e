/**
 * Issue #22 on the daemon side, over the in-memory transport (no process, TestClock): the native Harness
 * calls run in `Harness.<operation>` spans below the request handler that caused them, with the wire name as
 * an attribute (`close` included, which the end-to-end test cannot reach without waiting out an idle
 * Executor). The daemon's frame and decode-failure counters are tested with the transport
 * (test/runtime/transport/WebSocketTransport.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import { connect, processLayer, promptFrame, script, settle, until } from "../support/runtimeTestWire.js"

interface Recorded {
  readonly name: string
  readonly span: Tracer.Span
  readonly parent: Option.Option<Tracer.AnySpan>
}

/** A tracer that keeps every span it creates (with its parent), spans otherwise as Effect's own. */
const recordingTracer = () => {
  const spans: Array<Recorded> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = Tracer.nativeTracer.span(options)
      spans.push({ name: options.name, span, parent: options.parent })
      return span
    }
  })
  return { spans, tracer }
}

/** The span ids from `span`'s parent up to the root (or an external parent). */
const ancestorIds = (spans: ReadonlyArray<Recorded>, span: Recorded): ReadonlyArray<string> => {
  const out: Array<string> = []
  let parent = Option.getOrUndefined(span.parent)
  while (parent !== undefined && out.length < 64) {
    out.push(parent.spanId)
    const id = parent.spanId
    const recorded = spans.find((s) => s.span.spanId === id)
    parent = recorded === undefined ? undefined : Option.getOrUndefined(recorded.parent)
  }
  return out
}

describe("Harness spans (TracedHarness)", () => {
  it.effect("a direct Run's prepare, start and close are children of its Runtime.prompt_request, which continues Core's span", () => {
    const { spans, tracer } = recordingTracer()
    return Effect.gen(function* () {
      const { core } = yield* connect()
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const coreSpanId = "00f067aa0ba902b7"
      yield* core.toRuntime({ ...promptFrame("run-1", script([{ delta: "x" }])), trace: `00-${traceId}-${coreSpanId}-01` })
      yield* until(core, "done")
      yield* settle
      const handler = spans.filter((s) => s.name === "Runtime.prompt_request")
      assert.strictEqual(handler.length, 1)
      assert.strictEqual(Option.getOrUndefined(handler[0]!.parent)?.spanId, coreSpanId)
      const expected: ReadonlyArray<readonly [string, string]> = [
        ["prepare", "execution_prepare"],
        ["start", "execution_start"],
        ["close", "execution_release"]
      ]
      for (const [operation, wire] of expected) {
        const found = spans.filter((s) => s.name === `Harness.${operation}`)
        assert.strictEqual(found.length, 1, operation)
        const span = found[0]!
        assert.include(ancestorIds(spans, span), handler[0]!.span.spanId, operation)
        assert.strictEqual(span.span.traceId, traceId, operation)
        assert.strictEqual(span.span.attributes.get("agentwire.wire.type"), wire, operation)
        assert.strictEqual(span.span.attributes.get("agentwire.harness.operation"), operation)
        assert.strictEqual(span.span.attributes.get("agentwire.harness.kind"), "scripted")
        assert.isDefined(span.span.attributes.get("agentwire.executor_id"), operation)
      }
    }).pipe(Effect.withTracer(tracer), Effect.provide(processLayer()))
  })
})
