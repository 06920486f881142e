/**
 * A `function_result` whose payload does not decode (issue #17): the decode error carries the result's call and
 * delivery ids when both can be read safely (own members, valid bounded ids), so the Runtime can answer
 * `invalid_result` instead of leaving Core to wait 15 s; otherwise it carries neither.
 */
import { assert, describe, it } from "@effect/vitest"
import { Messages } from "../../src/proto/index.js"
import { getErr } from "./support/frames.js"

const frame = (payload: unknown) => JSON.stringify({ type: "function_result", id: "run-1", payload })
const good = { delivery_id: "function:run-1:call-1", call_id: "call-1", success: true }

describe("function_result decode errors", () => {
  it("carries the call and delivery ids when the content does not decode", () => {
    for (const content of [[{ type: "input_text" }], [{ type: "no_such_part", text: "x" }], "text", null, [{ type: "input_text", text: "x", extra: 1 }]]) {
      const error = getErr(Messages.decodeCoreToRuntime(frame({ ...good, content })))
      assert.strictEqual(error.code, "invalid_payload")
      assert.strictEqual(error.type, "function_result")
      assert.strictEqual(error.id, "run-1")
      assert.strictEqual(error.call_id, "call-1")
      assert.strictEqual(error.delivery_id, "function:run-1:call-1")
    }
    // another member failing (success not a boolean, an unknown member) is the same: the identity is readable
    const error = getErr(Messages.decodeCoreToRuntime(frame({ ...good, success: "yes", content: [] })))
    assert.strictEqual(error.call_id, "call-1")
  })

  it("carries neither id when either cannot be read safely", () => {
    const cases: ReadonlyArray<unknown> = [
      { success: true, content: 1 },
      { ...good, call_id: undefined, content: 1 },
      { ...good, call_id: " ", content: 1 },
      { ...good, call_id: "c".repeat(129), content: 1 },
      { ...good, delivery_id: "d".repeat(129), content: 1 },
      { ...good, delivery_id: 7, content: 1 },
      { ...good, call_id: { nested: "call-1" }, content: 1 },
      [good],
      "payload"
    ]
    for (const payload of cases) {
      const error = getErr(Messages.decodeCoreToRuntime(frame(payload)))
      assert.strictEqual(error.code, "invalid_payload")
      assert.isUndefined(error.call_id)
      assert.isUndefined(error.delivery_id)
    }
    // ids inherited from a polluted prototype are never read (JSON.parse keeps "__proto__" as an own member)
    const polluted = getErr(Messages.decodeCoreToRuntime(
      `{"type":"function_result","id":"run-1","payload":{"__proto__":{"call_id":"c","delivery_id":"d"},"content":1}}`
    ))
    assert.isUndefined(polluted.call_id)
  })

  it("never reads ids of another type's payload, nor of a frame too deep to parse", () => {
    const steer = getErr(Messages.decodeCoreToRuntime(JSON.stringify({ type: "prompt_steer", id: "run-1", payload: { ...good, content: 1 } })))
    assert.isUndefined(steer.call_id)
    const deep = `{"type":"function_result","id":"run-1","payload":{"delivery_id":"d","call_id":"c","success":true,"content":${"[".repeat(200)}${"]".repeat(200)}}}`
    const tooDeep = getErr(Messages.decodeCoreToRuntime(deep))
    assert.strictEqual(tooDeep.code, "too_deep")
    assert.isUndefined(tooDeep.call_id)
  })
})
