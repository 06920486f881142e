import { assert, describe, it } from "@effect/vitest"
import { echoFragments, inputText, parseInput } from "../../../src/runtime/harness/scripted/Script.js"

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
