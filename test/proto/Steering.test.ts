/**
 * Active-input receipts (reference part 2 §2): the phase a `prompt_steer_ack` reports, which phases end an
 * input, the receipt shape rule (I4) and the conflict fingerprint of a steer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Ids, Messages, Steering } from "../../src/proto/index.js"
import { getErr, getOk } from "./support/frames.js"

const inputId = Ids.unsafeMake.inputId("17")
const input = [{ content: [{ type: "input_text", text: "Also list the flaky ones." }] }] as const

describe("Steering.steerPhase", () => {
  it("reads accepted, written, an error code, or a receipt that proves nothing", () => {
    assert.deepStrictEqual(Steering.steerPhase({ input_id: "17", accepted: true }), { _tag: "Accepted" })
    assert.deepStrictEqual(Steering.steerPhase({ input_id: "17", accepted: false, written: true }), { _tag: "Written" })
    assert.deepStrictEqual(Steering.steerPhase({ input_id: "17", accepted: false, error_code: "busy", error: "pending" }), {
      _tag: "Error",
      code: "busy"
    })
    assert.deepStrictEqual(Steering.steerPhase({ input_id: "17", accepted: false }), { _tag: "Pending" })
    assert.deepStrictEqual(Steering.steerPhase({ input_id: "17", accepted: false, written: false }), { _tag: "Pending" })
  })

  it("ends an input on acceptance or a terminal code, not on written, pending, not_ready, busy or in_flight", () => {
    assert.isTrue(Steering.isTerminalSteerPhase({ _tag: "Accepted" }))
    assert.isFalse(Steering.isTerminalSteerPhase({ _tag: "Written" }))
    assert.isFalse(Steering.isTerminalSteerPhase({ _tag: "Pending" }))
    for (const code of ["not_ready", "busy", "in_flight"] as const) assert.isFalse(Steering.isTerminalSteerPhase({ _tag: "Error", code }))
    for (const code of ["invalid_input", "run_inactive", "input_conflict", "input_limit", "unsupported", "contract_violation", "rejected", "outcome_unknown"] as const) {
      assert.isTrue(Steering.isTerminalSteerPhase({ _tag: "Error", code }), code)
    }
  })
})

describe("prompt_steer_ack frames", () => {
  const decode = (payload: object) => Messages.decodeRuntimeToCore(JSON.stringify({ type: "prompt_steer_ack", id: "run-1", payload }))

  it("accept each consistent phase", () => {
    for (const payload of [
      { input_id: "17", accepted: false, written: true },
      { input_id: "17", accepted: true },
      { input_id: "17", accepted: false, error_code: "outcome_unknown", error: "timeout" },
      { input_id: "", accepted: false, error_code: "invalid_input" }
    ]) {
      getOk(decode(payload))
    }
  })

  it("refuse written together with accepted or an error code, and accepted with an error code (I4)", () => {
    for (const payload of [
      { input_id: "17", accepted: true, written: true },
      { input_id: "17", accepted: false, written: true, error_code: "busy" },
      { input_id: "17", accepted: true, error_code: "rejected" },
      { input_id: "17", accepted: false, error_code: "teapot" }
    ]) {
      assert.strictEqual(getErr(decode(payload)).code, "invalid_payload", JSON.stringify(payload))
    }
  })

  it("refuse a steer whose input id is blank or over 256 bytes and accept exactly 256", () => {
    const steer = (input_id: string) =>
      Messages.decodeCoreToRuntime(JSON.stringify({ type: "prompt_steer", id: "run-1", payload: { input_id, input } }))
    getOk(steer("é".repeat(128)))
    assert.strictEqual(getErr(steer("é".repeat(128) + "a")).code, "invalid_payload")
    assert.strictEqual(getErr(steer("  ")).code, "invalid_payload")
  })
})

describe("Steering.steerFingerprint", () => {
  const steer = (payload: Partial<Steering.PromptSteerPayload>): Steering.PromptSteerPayload => ({
    input_id: inputId,
    input,
    ...payload
  })

  it("is the same for the same input and durable flag, whatever the key order or input id", () => {
    const reordered = [{ content: [{ text: "Also list the flaky ones.", type: "input_text" }] }] as unknown as Steering.PromptSteerPayload["input"]
    assert.strictEqual(Steering.steerFingerprint(steer({ durable_receipt: true })), Steering.steerFingerprint(steer({ input: reordered, durable_receipt: true })))
    assert.strictEqual(
      Steering.steerFingerprint(steer({ durable_receipt: true })),
      Steering.steerFingerprint(steer({ input_id: Ids.unsafeMake.inputId("18"), durable_receipt: true }))
    )
    assert.strictEqual(Steering.steerFingerprint(steer({})), Steering.steerFingerprint(steer({ durable_receipt: false })))
  })

  it("differs when the input content, its order, or the durable flag differs", () => {
    const base = Steering.steerFingerprint(steer({ durable_receipt: true }))
    assert.notStrictEqual(base, Steering.steerFingerprint(steer({ durable_receipt: false })))
    assert.notStrictEqual(base, Steering.steerFingerprint(steer({ input: [{ content: [{ type: "input_text", text: "other" }] }], durable_receipt: true })))
    const two = [{ content: [{ type: "input_text", text: "a" }] }, { content: [{ type: "input_text", text: "b" }] }] as const
    const swapped = [two[1], two[0]] as const
    assert.notStrictEqual(Steering.steerFingerprint(steer({ input: two })), Steering.steerFingerprint(steer({ input: swapped })))
  })
})
