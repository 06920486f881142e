import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { echoFragments, inputText, parseInput, Script } from "../../../src/runtime/harness/scripted/Script.js"

describe("Script", () => {
  it("plain text echoes; a JSON object with script is a script; anything else echoes", () => {
    assert.deepStrictEqual(parseInput("hello"), { _tag: "Echo", text: "hello" })
    assert.deepStrictEqual(parseInput("{\"other\":1}"), { _tag: "Echo", text: "{\"other\":1}" })
    assert.deepStrictEqual(parseInput("[1]"), { _tag: "Echo", text: "[1]" })
    assert.deepStrictEqual(parseInput(JSON.stringify({ script: [{ delta: "a" }, { sleep: "2 seconds" }, { hang: true }] })), {
      _tag: "Script",
      steps: [{ delta: "a" }, { sleep: "2 seconds" }, { hang: true }]
    })
  })

  it("refuses unknown steps, extra members, two step keys and invalid values, naming the first bad step", () => {
    const bad = [
      [{ delta: "a" }, { teleport: true }],
      [{ delta: "a", extra: 1 }],
      [{ delta: "a", thinking: "b" }],
      [{ delta: "a", repeat: 0 }],
      [{ delta: "a", repeat: 1_000_001 }],
      [{ delta: "a", repeat: 1.5 }],
      [{ delta: "a", repeat: "2" }],
      [{ sleep: "soon" }],
      [{ hang: false }],
      [{ await_steer: 0 }],
      [{ await_steer: 1, write: "maybe" }],
      [{ error: { message: "x", code: "made_up" } }],
      [{ error: { message: "x", code: "server_error", http_status: 500 } }],
      [{ error: { message: "x", code: "connection_failed", http_status: 99 } }],
      [{ ask: { questions: [{ id: "q", question: "?", options: [] }, { id: "q", question: "?", options: [] }] } }]
    ]
    assert.deepStrictEqual(bad.map((steps) => parseInput(JSON.stringify({ script: steps }))), [
      { _tag: "InvalidScript", index: 1 },
      ...Array.from({ length: bad.length - 1 }, () => ({ _tag: "InvalidScript" as const, index: 0 }))
    ])
    assert.deepStrictEqual(parseInput(JSON.stringify({ script: "x" })), { _tag: "InvalidScript", index: undefined })
  })

  it("a delta step repeats 1 to 1,000,000 times", () => {
    const steps = [{ delta: "a", repeat: 1 }, { delta: "b", phase: "final", repeat: 1_000_000 }]
    assert.deepStrictEqual(parseInput(JSON.stringify({ script: steps })), { _tag: "Script", steps })
  })

  it("echo fragments concatenate to exactly the text", () => {
    for (const t of ["hello world", "  lead", "trail  ", "a\n\nb", "   ", "", "one"]) {
      assert.strictEqual(echoFragments(t).join(""), t)
    }
    assert.deepStrictEqual(echoFragments("hello big world"), ["hello", " big", " world"])
  })

  it("reads input like a text-only transport: parts joined, messages separated by a blank line, images marked", () => {
    assert.strictEqual(
      inputText([
        { content: [{ type: "input_text", text: "a" }, { type: "input_text", text: "b" }] },
        { content: [{ type: "input_image", image_url: "data:image/png;base64,AA==" }] }
      ]),
      "ab\n\n[image]"
    )
  })
})

describe("parseInput's in-place validation agrees with Schema's decode", () => {
  const decode = Schema.decodeUnknownResult(Script, { onExcessProperty: "error" })
  const verdict = (value: unknown) => {
    const parsed = parseInput(JSON.stringify(value))
    return parsed._tag
  }
  const valid: ReadonlyArray<unknown> = [
    { script: [] },
    { script: [{ delta: "a" }, { delta: "b", phase: "final" }, { thinking: "t" }, { usage: { input_tokens: 1, output_tokens: 2 } }] },
    { script: [{ sleep: "2 seconds" }, { sleep: 150 }, { hang: true }] },
    { script: Array.from({ length: 500 }, (_, i) => ({ delta: `fragment ${i} ` })) }
  ]
  const invalid: ReadonlyArray<unknown> = [
    { script: [{ delta: 1 }] },
    { script: [{ delta: "a", extra: true }] },
    { script: [{ sleep: "not a duration" }] },
    { script: [{ sleep: -1 }] },
    { script: [{ hang: false }] },
    { script: [{ error: { message: "m", http_status: 500 } }] },
    { script: [{}] },
    { script: "nope" },
    { script: [...Array.from({ length: 499 }, () => ({ delta: "x" })), { delta: null }] }
  ]

  it("accepts exactly what the strict decode accepts, with the same steps", () => {
    for (const value of valid) {
      assert.isTrue(Result.isSuccess(decode(value)), JSON.stringify(value).slice(0, 80))
      const parsed = parseInput(JSON.stringify(value))
      assert.strictEqual(parsed._tag, "Script")
      if (parsed._tag === "Script") assert.deepStrictEqual(parsed.steps, Result.getOrThrow(decode(value)).script)
    }
    for (const value of invalid) {
      assert.isTrue(Result.isFailure(decode(value)), JSON.stringify(value).slice(0, 80))
      assert.strictEqual(verdict(value), "InvalidScript", JSON.stringify(value).slice(0, 80))
    }
  })
})
