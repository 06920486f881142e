/**
 * The generated-code stage of the codec's in-place validator (src/proto/internal/fastValidator.ts): it reads
 * declared members by constant name, so these tests pin the cases where a plain property read could differ
 * from Schema's own-member rule. The validator may refuse more than Schema (the codec then decodes with
 * Schema), never accept more. Agreement with Schema on generated and mutated messages is in
 * FastValidator.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { compileValidator } from "../../src/proto/internal/fastValidator.js"
import { Messages } from "../../src/proto/index.js"

const delta = { type: "delta", id: "run-1", payload: { delta: "Hello", sequence: 1 } }

describe("fastValidator (generated code)", () => {
  it("accepts a valid frame and refuses a missing, retyped or unknown member", () => {
    const validate = compileValidator(Messages.Delta.ast)!
    assert.isTrue(validate(JSON.parse(JSON.stringify(delta))))
    assert.isFalse(validate({ ...delta, payload: { sequence: 1 } }))
    assert.isFalse(validate({ ...delta, payload: { delta: "Hello", sequence: -1 } }))
    assert.isFalse(validate({ ...delta, payload: { delta: "Hello", sequence: 1.5 } }))
    assert.isFalse(validate({ ...delta, payload: { delta: "Hello", sequence: 1, extra: true } }))
  })

  it("never lets a member inherited from a polluted Object.prototype stand in for a missing one", () => {
    const validate = compileValidator(Messages.Delta.ast)!
    const frame = JSON.parse(JSON.stringify({ ...delta, payload: { sequence: 1 } }))
    const proto = Object.prototype as Record<string, unknown>
    proto["delta"] = "polluted"
    try {
      assert.isFalse(validate(frame))
    } finally {
      delete proto["delta"]
    }
    assert.isFalse(validate(frame))
  })

  it("treats a member named like an Object.prototype property (constructor) as missing unless the input owns it", () => {
    const validate = compileValidator(Schema.Struct({ constructor: Schema.String }).ast)!
    assert.isFalse(validate(JSON.parse("{}")))
    assert.isFalse(validate(JSON.parse("{\"constructor\":1}")))
    assert.isTrue(validate(JSON.parse("{\"constructor\":\"x\"}")))
  })

  it("refuses a non-plain object on the fast path, which Schema then decides", () => {
    const validate = compileValidator(Messages.Delta.ast)!
    class Frame {
      constructor(readonly type: string, readonly id: string, readonly payload: unknown) {}
    }
    const instance = new Frame("delta", "run-1", { delta: "Hello", sequence: 1 })
    assert.isFalse(validate(instance))
    // the codec's encode still accepts it through Schema's encoder
    assert.isTrue(Result.isSuccess(Messages.encodeMessage(instance as unknown as Messages.Message)))
  })
})
