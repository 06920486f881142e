/**
 * An operator request's body and query (OperatorBody.ts): every answer of `readBody` (decoded, not JSON, too deep,
 * not matching the schema, too large), the decoder reused across requests, and `queryParam` reading a target as
 * `new URL(...).searchParams` does.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { queryParam, readBody } from "../../../src/core/dev/OperatorBody.js"
import { MessageInput } from "../../../src/proto/index.js"

const Body = Schema.Struct({ name: Schema.String, count: Schema.optionalKey(Schema.Number) })

const post = (body: string) =>
  HttpServerRequest.fromWeb(new Request("http://operator.test/x", { method: "POST", body, headers: { "content-type": "application/json" } }))

const detail = (body: string, maxBytes?: number) =>
  readBody(post(body), Body, maxBytes).pipe(Effect.flip, Effect.map((error) => error.detail))

describe("OperatorBody", () => {
  it.effect("decodes a body strictly, the same way on every request", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 3; i++) {
        assert.deepStrictEqual(yield* readBody(post(`{"name":"n${i}","count":${i}}`), Body), { name: `n${i}`, count: i })
      }
      // An empty body is an empty object (which this schema refuses).
      assert.match(yield* detail("  "), /^the body does not match the schema: /)
    }))

  it.effect("refuses a body that is not JSON, nests too deep, does not match or is too large, never echoing it", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* detail("{secret"), "the body is not JSON")
      assert.match(yield* detail("[".repeat(200) + "]".repeat(200)), /^the body nests deeper than \d+ levels or holds more than \d+ values$/)
      const extra = yield* detail(`{"name":"n","secret_key":"s3cr3t"}`)
      assert.match(extra, /^the body does not match the schema: /)
      assert.notInclude(extra, "s3cr3t")
      assert.strictEqual(yield* detail(`{"name":"${"x".repeat(2 * 1024 * 1024)}"}`, 1024 * 1024), "the body could not be read (at most 1 MiB)")
    }))

  it.effect("a Turn's input body: what the compiled validator accepts is what Schema's strict decode answers, refusals read as before", () =>
    Effect.gen(function* () {
      const TurnBody = Schema.Struct({ input: MessageInput.MessageInput })
      const strictDecode = Schema.decodeUnknownResult(TurnBody, { onExcessProperty: "error" })
      const bodies = [
        { input: [{ content: [{ type: "input_text", text: "hello" }] }] },
        { input: [{ content: [{ type: "input_text", text: "quote \" and é" }, { type: "input_image", image_url: "data:image/png;base64,AA" }] }, { content: [] }] },
        { input: [] },
        { input: [{ content: [{ type: "input_text" }] }] },
        { input: [{ content: [{ type: "input_text", text: 7 }] }] },
        { input: [{ content: [{ type: "input_text", text: "x", extra: true }] }] },
        { input: [{ content: [{ type: "text", text: "x" }] }] },
        { input: [{ content: "not parts" }] },
        { input: {} },
        { other: 1 }
      ]
      let accepted = 0
      for (const body of bodies) {
        const expected = strictDecode(body)
        const got = yield* Effect.result(readBody(post(JSON.stringify(body)), TurnBody))
        assert.strictEqual(got._tag, expected._tag, JSON.stringify(body))
        if (got._tag === "Success" && expected._tag === "Success") {
          assert.deepStrictEqual(got.success, expected.success)
          accepted++
        }
        if (got._tag === "Failure") assert.match(got.failure.detail, /^the body does not match the schema: /)
      }
      assert.isAtLeast(accepted, 2)
      assert.isBelow(accepted, bodies.length)
    }))

  it("reads a query parameter as the URL's searchParams do", () => {
    for (const target of ["/t/1/events", "/t/1/events?after=7", "/t/1/events?x=1&after=12&after=13", "/t?after=%32%33", "/t?after=a+b", "/t?after=5#frag", "/t?#after=5", "/t?after"]) {
      assert.strictEqual(queryParam(target, "after"), new URL(target, "http://operator.invalid").searchParams.get("after"), target)
    }
  })
})
