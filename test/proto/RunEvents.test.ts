/**
 * Engine-failure classification of the `error` frame (reference part 1 §8.6, decision E9): the 11 accepted
 * codes, `http_status` only with `connection_failed` and only 100..599, tolerant decoding that never fails
 * the frame, and an encoder that refuses what the decoder would drop. Also the other Run-event shape rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { ErrorCodes, Ids, Messages, RunEvents } from "../../src/proto/index.js"
import { getErr, getOk } from "./support/frames.js"

const engineCodes = [
  "authentication_error",
  "rate_limit_exceeded",
  "usage_limit_exceeded",
  "server_overloaded",
  "server_error",
  "invalid_request",
  "resource_not_found",
  "request_timeout",
  "context_length_exceeded",
  "cyber_policy",
  "connection_failed"
] as const

describe("RunEvents.normalizeEngineFailure", () => {
  it("classifies each of the 11 accepted codes", () => {
    for (const code of engineCodes) {
      assert.deepStrictEqual(RunEvents.normalizeEngineFailure(code, undefined), Option.some({ code, httpStatus: undefined }))
    }
  })

  it("keeps http_status only with connection_failed and only as an integer from 100 to 599", () => {
    for (const status of [100, 404, 502, 599]) {
      assert.deepStrictEqual(RunEvents.normalizeEngineFailure("connection_failed", status), Option.some({ code: "connection_failed", httpStatus: status }))
    }
    for (const status of [99, 600, 502.5, "502", null, -1, Number.NaN, Infinity, true]) {
      assert.deepStrictEqual(
        RunEvents.normalizeEngineFailure("connection_failed", status),
        Option.some({ code: "connection_failed", httpStatus: undefined }),
        String(status)
      )
    }
    for (const code of engineCodes.filter((c) => c !== "connection_failed")) {
      assert.deepStrictEqual(RunEvents.normalizeEngineFailure(code, 502), Option.some({ code, httpStatus: undefined }))
    }
  })

  it("leaves unknown, differently cased, non-string and missing codes unclassified", () => {
    for (const code of ["teapot", "Connection_Failed", " server_error", "", 42, null, undefined, true, ["server_error"], { code: "server_error" }]) {
      assert.deepStrictEqual(RunEvents.normalizeEngineFailure(code, 502), Option.none(), JSON.stringify(code))
    }
  })
})

describe("the error frame", () => {
  const frame = (payload: object) => JSON.stringify({ type: "error", id: "run-1", payload })
  const decoded = (payload: object) => {
    const message = getOk(Messages.decodeRuntimeToCore(frame(payload)))
    assert.strictEqual(message.type, "error")
    return (message as Messages.MessageOfType<"error">).payload
  }

  it("keeps an accepted code and a valid connection_failed status", () => {
    assert.deepStrictEqual(decoded({ error: "reset", code: "connection_failed", http_status: 502 }), {
      error: "reset",
      code: "connection_failed",
      http_status: 502
    })
    assert.deepStrictEqual(decoded({ error: "slow down", code: "rate_limit_exceeded" }), { error: "slow down", code: "rate_limit_exceeded" })
  })

  it("drops malformed code and status values without failing the frame", () => {
    for (const [payload, expected] of [
      [{ error: "x", code: "teapot", http_status: 418 }, { error: "x" }],
      [{ error: "x", code: 7 }, { error: "x" }],
      [{ error: "x", code: null, http_status: null }, { error: "x" }],
      [{ error: "x", code: "server_error", http_status: 500 }, { error: "x", code: "server_error" }],
      [{ error: "x", code: "connection_failed", http_status: "502" }, { error: "x", code: "connection_failed" }],
      [{ error: "x", code: "connection_failed", http_status: 700 }, { error: "x", code: "connection_failed" }],
      [{ error: "x", http_status: 502 }, { error: "x" }],
      [{ error: "x", code: { nested: true }, http_status: [1] }, { error: "x" }]
    ] as const) {
      assert.deepStrictEqual(decoded(payload), expected, JSON.stringify(payload))
    }
  })

  it("still refuses a frame without the error text or with an unknown member", () => {
    for (const payload of [{ code: "server_error" }, { error: null }, { error: "x", retry_after: 3 }]) {
      assert.strictEqual(getErr(Messages.decodeRuntimeToCore(frame(payload))).code, "invalid_payload")
    }
  })

  it("cannot be encoded with a status the receiver would drop", () => {
    const id = Ids.unsafeMake.runId("run-1")
    for (const payload of [
      { error: "x", code: "server_error", http_status: 500 },
      { error: "x", http_status: 500 },
      { error: "x", code: "connection_failed", http_status: 600 }
    ] as ReadonlyArray<RunEvents.ErrorPayload>) {
      assert.deepStrictEqual(
        getErr(Messages.encodeMessage({ type: "error", id, payload })),
        new Messages.OutgoingFrameRejected({ type: "error", reason: "invalid_message" })
      )
    }
    const ok = { type: "error", id, payload: { error: "x", code: "connection_failed", http_status: 599 } } as const
    assert.deepStrictEqual(getOk(Messages.decodeRuntimeToCore(getOk(Messages.encodeMessage(ok)))), ok)
  })

  it("uses exactly the codes of the ErrorCodes literal", () => {
    assert.deepStrictEqual([...ErrorCodes.EngineFailureCode.literals].sort(), [...engineCodes].sort())
  })
})

describe("other Run events", () => {
  const decode = (type: string, payload: object) =>
    Messages.decodeRuntimeToCore(JSON.stringify({ type, id: "run-1", payload }))

  it("carry output_message text exactly when the message is completed", () => {
    getOk(decode("output_message", { id: "m", status: "completed", text: "" }))
    getOk(decode("output_message", { id: "m", status: "in_progress" }))
    getOk(decode("output_message", { id: "m", status: "incomplete", phase: "commentary" }))
    assert.strictEqual(getErr(decode("output_message", { id: "m", status: "completed" })).code, "invalid_payload")
    assert.strictEqual(getErr(decode("output_message", { id: "m", status: "in_progress", text: "x" })).code, "invalid_payload")
    assert.strictEqual(getErr(decode("output_message", { id: "", status: "in_progress" })).code, "invalid_payload")
  })

  it("refuse a tool_call with the retired native_item member", () => {
    assert.strictEqual(getErr(decode("tool_call", { id: "c", name: "", stage: "before", native_item: {} })).code, "invalid_payload")
  })

  it("treat a usage snapshot with no measurement as empty, never as zero", () => {
    assert.isTrue(RunEvents.isEmptyUsage({}))
    assert.isFalse(RunEvents.isEmptyUsage({ input_tokens: 0 }))
    assert.deepStrictEqual(getOk(decode("usage", {})), { type: "usage", id: Ids.unsafeMake.runId("run-1"), payload: {} })
  })

  it("refuse negative or fractional token counts", () => {
    for (const usage of [{ input_tokens: -1 }, { output_tokens: 1.5 }, { cost_usd: -0.01 }]) {
      assert.strictEqual(getErr(decode("usage", usage)).code, "invalid_payload")
    }
  })
})
