/**
 * W3C traceparent parsing (diagnostic only: never rejects a frame, never throws) and the exact wire-version
 * match (reference part 1 §2.2, §3).
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Trace, Version } from "../../src/proto/index.js"

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
const SPAN_ID = "00f067aa0ba902b7"
const valid = `00-${TRACE_ID}-${SPAN_ID}-01`

describe("Trace.parseTraceparent", () => {
  it("parses a version-00 traceparent and reads the sampled bit", () => {
    assert.deepStrictEqual(Trace.parseTraceparent(valid), Option.some({ traceId: TRACE_ID, spanId: SPAN_ID, sampled: true }))
    for (const [flags, sampled] of [["00", false], ["02", false], ["03", true], ["ff", true]] as const) {
      assert.deepStrictEqual(Trace.parseTraceparent(`00-${TRACE_ID}-${SPAN_ID}-${flags}`), Option.some({ traceId: TRACE_ID, spanId: SPAN_ID, sampled }))
    }
  })

  it("accepts a future version, ignoring the fields it appends", () => {
    assert.deepStrictEqual(Trace.parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-01-extra-fields`), Option.some({ traceId: TRACE_ID, spanId: SPAN_ID, sampled: true }))
    assert.deepStrictEqual(Trace.parseTraceparent(`cc-${TRACE_ID}-${SPAN_ID}-00`), Option.some({ traceId: TRACE_ID, spanId: SPAN_ID, sampled: false }))
  })

  it("treats upper-case hex, zero ids, version ff and extra fields on version 00 as absent", () => {
    for (const value of [
      valid.toUpperCase(),
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${SPAN_ID}-0A`,
      `00-${"0".repeat(32)}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${"0".repeat(16)}-01`,
      `ff-${TRACE_ID}-${SPAN_ID}-01`,
      `${valid}-extra`
    ]) {
      assert.deepStrictEqual(Trace.parseTraceparent(value), Option.none(), value)
    }
  })

  it("treats malformed, oversized, empty or missing values as absent without throwing", () => {
    const oversized = `01-${TRACE_ID}-${SPAN_ID}-01-${"x".repeat(256)}`
    for (const value of [
      undefined,
      "",
      " " + valid,
      valid + " ",
      `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${SPAN_ID}`,
      `00_${TRACE_ID}_${SPAN_ID}_01`,
      `0-${TRACE_ID}-${SPAN_ID}-01`,
      `01-${TRACE_ID}-${SPAN_ID}-01extra`,
      oversized,
      "not a traceparent"
    ]) {
      assert.deepStrictEqual(Trace.parseTraceparent(value), Option.none(), String(value).slice(0, 40))
    }
    for (const value of [null, 42, { traceparent: valid }, [valid]]) {
      assert.doesNotThrow(() => Trace.parseTraceparent(value as unknown as string))
      assert.deepStrictEqual(Trace.parseTraceparent(value as unknown as string), Option.none())
    }
  })

  it("formats a context back to the same version-00 traceparent", () => {
    const ctx = Option.getOrThrow(Trace.parseTraceparent(valid))
    assert.strictEqual(Trace.formatTraceparent(ctx), valid)
    assert.strictEqual(Trace.formatTraceparent({ ...ctx, sampled: false }), `00-${TRACE_ID}-${SPAN_ID}-00`)
  })

  it("echoes a trace of at most 256 characters and omits a longer one", () => {
    assert.strictEqual(Trace.echoable(valid), valid)
    assert.strictEqual(Trace.echoable("t".repeat(256)), "t".repeat(256))
    assert.strictEqual(Trace.echoable("t".repeat(257)), undefined)
    assert.strictEqual(Trace.echoable(undefined), undefined)
  })
})

describe("Version.isCompatible", () => {
  it("accepts exactly 0.10.0", () => {
    assert.strictEqual(Version.ProtocolVersion, "0.10.0")
    assert.isTrue(Version.isCompatible("0.10.0"))
  })

  it("refuses every version of the shared contract fixture, which includes the reference's list", () => {
    for (const required of ["0.7.0", "0.8.99", "0.8.", "0.10.0-dev", "0.10.0+build"]) {
      assert.include(Version.rejectedVersionsFixture, required)
    }
    for (const version of Version.rejectedVersionsFixture) assert.isFalse(Version.isCompatible(version), version)
  })

  it("refuses near misses, padding and absent values", () => {
    for (const version of [" 0.10.0", "0.10.0 ", "v0.10.0", "0.10.00", "00.10.0", "0.010.0", "0.10.0.0", null, undefined]) {
      assert.isFalse(Version.isCompatible(version), String(version))
    }
  })
})
