/**
 * The structural bound of peer JSON (issue #17, "deep nesting crashes the daemon"): depth and value count are
 * checked without recursion on the frame text before `JSON.parse`, on parsed values, and on every message we
 * encode; each bound is tested just at and just past its boundary, and a refused frame keeps its type and
 * bounded id so its family's documented reply can be sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Canonical, JsonBounds, Limits, Messages } from "../../src/proto/index.js"
import { allSupported, descriptor } from "../support/capabilities.js"
import { getErr, getOk, invalidFrame } from "./support/frames.js"
import { coreToRuntimeSamples, runtimeToCoreSamples } from "./support/samples.js"

/** `depth` nested arrays around `1`. */
const nestedText = (depth: number): string => "[".repeat(depth) + "1" + "]".repeat(depth)
const nestedValue = (depth: number): unknown => {
  let value: unknown = 1
  for (let i = 0; i < depth; i++) value = [value]
  return value
}
/** `depth` nested objects `{"a":…}` around `1`. */
const nestedObjectText = (depth: number): string => '{"a":'.repeat(depth) + "1" + "}".repeat(depth)

/** A frame whose payload member `agent_options` nests so that the whole frame has the given depth. */
const deepPrepareFrame = (frameDepth: number): string => {
  const sample = coreToRuntimeSamples.execution_prepare.message
  const frame = JSON.stringify({ ...sample, payload: { ...sample.payload, configuration: { ...sample.payload.configuration, agent_options: { x: "HOLE" } } } })
  // envelope (1) > payload (2) > configuration (3) > agent_options (4) > x: arrays from depth 5
  return frame.replace('"HOLE"', nestedText(frameDepth - 4))
}

describe("JsonBounds.scanJsonText", () => {
  it("accepts exactly MaxJsonDepth and refuses one more, for arrays and objects", () => {
    assert.deepStrictEqual(JsonBounds.scanJsonText(nestedText(Limits.MaxJsonDepth)), {})
    assert.strictEqual(JsonBounds.scanJsonText(nestedText(Limits.MaxJsonDepth + 1)).violation, "too_deep")
    assert.deepStrictEqual(JsonBounds.scanJsonText(nestedObjectText(Limits.MaxJsonDepth)), {})
    assert.strictEqual(JsonBounds.scanJsonText(nestedObjectText(Limits.MaxJsonDepth + 1)).violation, "too_deep")
  })

  it("counts values exactly: MaxJsonNodes accepted, one more refused", () => {
    // The root array plus n - 1 elements is n values.
    const array = (n: number) => `[${Array.from({ length: n - 1 }, () => "0").join(",")}]`
    assert.deepStrictEqual(JsonBounds.scanJsonText(array(Limits.MaxJsonNodes)), {})
    assert.strictEqual(JsonBounds.scanJsonText(array(Limits.MaxJsonNodes + 1)).violation, "too_many_nodes")
    // Keys are not values; empty containers add none.
    assert.deepStrictEqual(JsonBounds.scanJsonText('{"a":[],"b":{},"c":"x"}', { maxNodes: 4 }), {})
    assert.strictEqual(JsonBounds.scanJsonText('{"a":[],"b":{},"c":"x"}', { maxNodes: 3 }).violation, "too_many_nodes")
  })

  it("ignores brackets, commas and escaped quotes inside strings", () => {
    const text = JSON.stringify({ s: "[".repeat(500) + '\\"{,,,' + "{".repeat(500) })
    assert.deepStrictEqual(JsonBounds.scanJsonText(text, { maxDepth: 1, maxNodes: 2 }), {})
  })

  it("finds the top-level type and id behind a member that is too deep", () => {
    const text = `{"payload":${nestedText(5000)},"type":"execution_prepare","id":"prep-1"}`
    const scan = JsonBounds.scanJsonText(text)
    assert.deepStrictEqual(scan, { violation: "too_deep", typeToken: '"execution_prepare"', idToken: '"prep-1"' })
  })

  it("ends on an unterminated string and on a 2-million-deep text without throwing", () => {
    assert.deepStrictEqual(JsonBounds.scanJsonText('{"type":"x'), {})
    assert.strictEqual(JsonBounds.scanJsonText("[".repeat(2_000_000)).violation, "too_deep")
  })
})

describe("JsonBounds.checkJsonValue", () => {
  it("walks parsed values with the same depth and node semantics", () => {
    assert.strictEqual(JsonBounds.checkJsonValue(nestedValue(Limits.MaxJsonDepth)), undefined)
    assert.strictEqual(JsonBounds.checkJsonValue(nestedValue(Limits.MaxJsonDepth + 1)), "too_deep")
    assert.strictEqual(JsonBounds.checkJsonValue(Array.from({ length: Limits.MaxJsonNodes - 1 }, () => 0)), undefined)
    assert.strictEqual(JsonBounds.checkJsonValue(Array.from({ length: Limits.MaxJsonNodes }, () => 0)), "too_many_nodes")
    assert.strictEqual(JsonBounds.checkJsonValue({ a: [], b: {}, c: "x", d: undefined }, { maxNodes: 4 }), undefined)
    assert.strictEqual(JsonBounds.checkJsonValue({ a: [], b: {}, c: "x" }, { maxNodes: 3 }), "too_many_nodes")
  })

  it("reports a 100,000-deep and a cyclic value instead of overflowing the stack", () => {
    assert.strictEqual(JsonBounds.checkJsonValue(nestedValue(100_000)), "too_deep")
    const cyclic: Record<string, unknown> = {}
    cyclic["self"] = cyclic
    assert.strictEqual(JsonBounds.checkJsonValue(cyclic), "too_deep")
  })
})

describe("the bound inside the shared decode", () => {
  it("refuses a Core → Runtime frame one level too deep with its type and id (the family's reply), accepts the limit", () => {
    getOk(Messages.decodeCoreToRuntime(deepPrepareFrame(Limits.MaxJsonDepth)))
    const frame = deepPrepareFrame(Limits.MaxJsonDepth + 1)
    assert.deepStrictEqual(
      getErr(Messages.decodeCoreToRuntime(frame)),
      invalidFrame(frame, { code: "too_deep", type: "execution_prepare", id: coreToRuntimeSamples.execution_prepare.message.id })
    )
  })

  it("refuses a deep Run frame from a device before the journal sees it (tool_call args 6,000 deep)", () => {
    const sample = runtimeToCoreSamples.tool_call.message
    const frame = JSON.stringify({ ...sample, payload: { ...sample.payload, args: { a: "HOLE" } } }).replace('"HOLE"', nestedText(6000))
    assert.deepStrictEqual(
      getErr(Messages.decodeRuntimeToCore(frame)),
      invalidFrame(frame, { code: "too_deep", type: "tool_call", id: sample.id })
    )
  })

  it("refuses a 100,000-deep frame without a type as too_deep, and never echoes an oversized id", () => {
    const frame = nestedText(100_000)
    assert.deepStrictEqual(getErr(Messages.decodeRuntimeToCore(frame)), invalidFrame(frame, { code: "too_deep" }))
    const longId = "r".repeat(Limits.MaxCorrelationIdBytes + 1)
    const withLongId = `{"type":"delta","id":"${longId}","payload":${nestedText(200)}}`
    assert.deepStrictEqual(
      getErr(Messages.decodeRuntimeToCore(withLongId)),
      invalidFrame(withLongId, { code: "id_too_large", type: "delta" })
    )
  })

  it("refuses a frame of more than MaxJsonNodes values as too_many_nodes", () => {
    const frame = `{"type":"usage","id":"run-1","payload":{"raw":{"a":[${Array.from({ length: Limits.MaxJsonNodes }, () => "0").join(",")}]}}}`
    assert.deepStrictEqual(
      getErr(Messages.decodeRuntimeToCore(frame)),
      invalidFrame(frame, { code: "too_many_nodes", type: "usage", id: "run-1" })
    )
  })

  it("never encodes a message beyond the bound (an operator's 5,000-deep agent_options)", () => {
    const sample = coreToRuntimeSamples.execution_prepare.message
    const message = {
      ...sample,
      payload: { ...sample.payload, configuration: { ...sample.payload.configuration, agent_options: { x: nestedValue(5000) } } }
    } as Messages.Message
    assert.strictEqual(getErr(Messages.encodeMessage(message)).reason, "invalid_message")
  })
})

describe("bounded walks over decoded peer values", () => {
  it("canonicalJson encodes a 100,000-deep value iteratively and matches the recursive definition", () => {
    const text = Canonical.canonicalJson(nestedValue(100_000))
    assert.strictEqual(text.length, 200_001)
    assert.strictEqual(Canonical.canonicalJson({ b: [1, undefined, { d: 1, c: "x" }], a: null, u: undefined }), '{"a":null,"b":[1,null,{"c":"x","d":1}]}')
  })

  it("a heartbeat declares at most MaxAgentKinds kinds", () => {
    const kinds = (n: number) => Array.from({ length: n }, (_, i) => descriptor(`kind-${i}`, allSupported()))
    const frame = (n: number) => JSON.stringify({ type: "heartbeat", payload: { ts: 1, active_requests: 0, supported_agent_kinds: kinds(n) } })
    getOk(Messages.decodeRuntimeToCore(frame(Limits.MaxAgentKinds)))
    const tooMany = frame(Limits.MaxAgentKinds + 1)
    assert.deepStrictEqual(getErr(Messages.decodeRuntimeToCore(tooMany)), invalidFrame(tooMany, { code: "invalid_payload", type: "heartbeat" }))
  })
})
