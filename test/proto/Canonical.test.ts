/**
 * Canonical JSON (the encoding every fingerprint is computed over) and the function-result replay
 * fingerprint built on it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Canonical, Functions, Ids } from "../../src/proto/index.js"

describe("Canonical.canonicalJson", () => {
  it("does not depend on key order at any depth", () => {
    const a = { b: 1, a: { y: [1, { q: 1, p: 2 }], x: null }, c: "é" }
    const b = { c: "é", a: { x: null, y: [1, { p: 2, q: 1 }] }, b: 1 }
    assert.strictEqual(Canonical.canonicalJson(a), Canonical.canonicalJson(b))
    assert.strictEqual(Canonical.canonicalJson(a), '{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1,"c":"é"}')
    assert.isTrue(Canonical.canonicalEquals(a, b))
  })

  it("keeps array order and distinguishes values", () => {
    assert.notStrictEqual(Canonical.canonicalJson([1, 2]), Canonical.canonicalJson([2, 1]))
    assert.isFalse(Canonical.canonicalEquals({ a: 1 }, { a: "1" }))
    assert.isFalse(Canonical.canonicalEquals({ a: null }, {}))
  })

  it("drops undefined members and writes undefined array items as null, like JSON", () => {
    assert.strictEqual(Canonical.canonicalJson({ a: undefined, b: 2 }), '{"b":2}')
    assert.strictEqual(Canonical.canonicalJson([undefined, 1]), "[null,1]")
    assert.strictEqual(Canonical.canonicalJson("x"), '"x"')
    assert.strictEqual(Canonical.canonicalJson(null), "null")
  })

  it("sorts keys by code unit", () => {
    assert.strictEqual(Canonical.canonicalJson({ b: 1, B: 2, a: 3, "ä": 4 }), '{"B":2,"a":3,"b":1,"ä":4}')
  })

  it("omits the given top-level keys only", () => {
    assert.deepStrictEqual(Canonical.omitKeys({ delivery_id: "d", nested: { delivery_id: "keep" } }, ["delivery_id"]), {
      nested: { delivery_id: "keep" }
    })
  })
})

describe("Functions.functionResultFingerprint", () => {
  const result = (delivery: string, content: Functions.FunctionResultPayload["content"]): Functions.FunctionResultPayload => ({
    delivery_id: Ids.unsafeMake.deliveryId(delivery),
    call_id: Ids.unsafeMake.callId("call_7"),
    success: true,
    content
  })
  const first = { type: "input_text", text: "Order 5521 shipped." } as const
  const second = { type: "input_image", image_url: "data:image/png;base64,AAAA" } as const

  it("ignores the delivery id, so a retry with new delivery identity is the same result", () => {
    assert.strictEqual(Functions.functionResultFingerprint(result("function:1", [first])), Functions.functionResultFingerprint(result("function:2", [first])))
  })

  it("does not depend on key order but does depend on content, its order and success", () => {
    const reordered = { text: "Order 5521 shipped.", type: "input_text" } as unknown as typeof first
    assert.strictEqual(Functions.functionResultFingerprint(result("d", [first])), Functions.functionResultFingerprint(result("d", [reordered])))
    assert.notStrictEqual(Functions.functionResultFingerprint(result("d", [first, second])), Functions.functionResultFingerprint(result("d", [second, first])))
    assert.notStrictEqual(
      Functions.functionResultFingerprint(result("d", [first])),
      Functions.functionResultFingerprint({ ...result("d", [first]), success: false })
    )
    assert.notStrictEqual(
      Functions.functionResultFingerprint(result("d", [first])),
      Functions.functionResultFingerprint({ ...result("d", [first]), call_id: Ids.unsafeMake.callId("call_8") })
    )
  })
})
