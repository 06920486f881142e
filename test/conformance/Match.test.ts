import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { any, bind, optional } from "../../scenarios/WireScenario.js"
import { emptyBindings, match, matchInterleaved, matchMessage, materialize, render } from "../../src/conformance/Match.js"

const ok = <A, E>(r: Result.Result<A, E>): A => {
  assert.isTrue(Result.isSuccess(r))
  return Result.getOrThrow(r)
}
const failure = <A, E>(r: Result.Result<A, E>): E => {
  assert.isTrue(Result.isFailure(r))
  return (r as Result.Failure<A, E>).failure
}

describe("Match", () => {
  it("binds a token to the first value and requires it to match afterwards", () => {
    const first = ok(match({ handle: bind("h", "sample") }, { handle: "handle-7" }, emptyBindings))
    assert.strictEqual(first.get("h"), "handle-7")
    ok(match({ handle: bind("h", "sample") }, { handle: "handle-7" }, first))
    const m = failure(match({ handle: bind("h", "sample") }, { handle: "handle-8" }, first))
    assert.deepStrictEqual(m, { path: "handle", expected: "\"handle-7\" (bound to h)", actual: "\"handle-8\"" })
  })

  it("requires exactly the template's members: a missing or an extra member is a mismatch", () => {
    assert.strictEqual(failure(match({ a: 1, b: 2 }, { a: 1 }, emptyBindings)).path, "b")
    const extra = failure(match({ a: 1 }, { a: 1, c: 3 }, emptyBindings))
    assert.deepStrictEqual(extra, { path: "c", expected: "<no such member>", actual: "3" })
  })

  it("accepts any present value for any(), and absence or a match for optional()", () => {
    ok(match({ ts: any() }, { ts: 17 }, emptyBindings))
    assert.strictEqual(failure(match({ ts: any() }, {}, emptyBindings)).path, "ts")
    ok(match({ error: optional(any()) }, {}, emptyBindings))
    ok(match({ error: optional(any()) }, { error: "x" }, emptyBindings))
    assert.strictEqual(failure(match({ error: optional("a") }, { error: "b" }, emptyBindings)).path, "error")
  })

  it("compares arrays in order and with their length", () => {
    ok(match([1, [2, 3]], [1, [2, 3]], emptyBindings))
    assert.strictEqual(failure(match([1, 2], [2, 1], emptyBindings)).path, "[0]")
    assert.strictEqual(failure(match([1], [1, 2], emptyBindings)).path, "<message>")
  })

  it("ignores the envelope trace unless the template states it", () => {
    ok(matchMessage({ type: "done", id: "r" }, { type: "done", id: "r", trace: "00-abc" }, emptyBindings))
    assert.strictEqual(failure(matchMessage({ type: "done", trace: "x" }, { type: "done", trace: "y" }, emptyBindings)).path, "trace")
  })

  it("materializes bound values, samples for unbound tokens, and omits optional members", () => {
    const bindings = new Map([["h", "handle-3"]])
    const built = ok(materialize({ handle: bind("h", "x"), exec: bind("e", "executor-1"), ts: any(5), error: optional("e") }, bindings))
    assert.deepStrictEqual(built.value, { handle: "handle-3", exec: "executor-1", ts: 5 })
    assert.strictEqual(built.bindings.get("e"), "executor-1")
    assert.deepStrictEqual(failure(materialize({ ts: any() }, emptyBindings)), { path: "ts" })
  })

  it("accepts any interleaving of ordered streams and rejects a reordering within a stream", () => {
    const streams = [[{ s: "started" }], [{ d: 1 }, { d: 2 }]]
    ok(matchInterleaved(streams, [{ d: 1 }, { s: "started" }, { d: 2 }], emptyBindings))
    ok(matchInterleaved(streams, [{ d: 1 }, { d: 2 }, { s: "started" }], emptyBindings))
    const m = failure(matchInterleaved(streams, [{ d: 2 }, { d: 1 }, { s: "started" }], emptyBindings))
    assert.strictEqual(m.index, 0)
  })

  it("backtracks bindings between interleavings", () => {
    const streams = [[{ id: bind("x", "a") }], [{ id: "2" }]]
    const bound = ok(matchInterleaved(streams, [{ id: "2" }, { id: "1" }], emptyBindings))
    assert.strictEqual(bound.get("x"), "1")
  })

  it("renders reports short and without secrets", () => {
    assert.strictEqual(render({ agent_options: { api_key: "sk" }, x: 1 }), "{\"agent_options\":\"<redacted>\",\"x\":1}")
    assert.isTrue(render("y".repeat(1000)).endsWith("(1002 chars)"))
  })
})
