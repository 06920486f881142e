import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { plainDeltaScript } from "../../../src/runtime/harness/scripted/DeltaScript.js"
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

describe("a plain delta script is read without JSON.parse, with JSON.parse's answer", () => {
  const plain = (deltas: ReadonlyArray<string>) => JSON.stringify({ script: deltas.map((delta) => ({ delta })) })
  const general = (text: string) => (JSON.parse(text) as { script: unknown }).script

  it("reads exactly the steps JSON.parse gives for the text JSON.stringify writes", () => {
    const cases = [["a"], [""], ["", ""], ["The parser accepts trailing commas only in "], ["]}", "},{", ",", "{delta:", "]"],
      ["é€😀", "\u007f\u2028\u2029 </script>"], Array.from({ length: 500 }, (_, i) => `d${i} `)]
    // Lone surrogates as raw text (JSON.stringify would escape them; JSON.parse keeps them as they are).
    const raw = ["{\"script\":[{\"delta\":\"\ud800 lone\"},{\"delta\":\"lone \udc00\"}]}"]
    for (const text of [...cases.map(plain), ...raw]) {
      const fast = plainDeltaScript(text)
      assert.isDefined(fast, text)
      assert.deepStrictEqual(fast, general(text))
      assert.deepStrictEqual(parseInput(text), { _tag: "Script", steps: general(text) as ReadonlyArray<never> })
    }
  })

  it("leaves every other text to the general path (escapes, whitespace, other members or steps, bad framing)", () => {
    const others = [
      plain(["quote \" inside"]),
      plain(["back\\slash"]),
      plain(["new\nline"]),
      plain(["tab\tin"]),
      "{\"script\":[]}",
      "{\"script\": [{\"delta\":\"a\"}]}",
      "{\"script\":[{\"delta\": \"a\"}]}",
      "{\"script\":[{\"delta\":\"a\"} ]}",
      "{\"script\":[{\"delta\":\"a\",\"phase\":\"p\"}]}",
      "{\"script\":[{\"delta\":\"a\"},{\"hang\":true}]}",
      "{\"script\":[{\"delta\":\"a\"},]}",
      "{\"script\":[{\"delta\":\"a\"}]}]}",
      "{\"script\":[{\"delta\":\"a\"}],\"x\":1]}",
      "{\"script\":[{\"delta\":\"a\"}]} ",
      "{\"script\":[{\"delta\":\"a}]}",
      "{\"script\":[{\"delta\":\"a\"}{\"delta\":\"b\"}]}",
      "{\"script\":[{\"delta\":1}]}",
      "hello"
    ]
    for (const text of others) {
      assert.isUndefined(plainDeltaScript(text), text)
    }
    // The general path still answers them as before.
    assert.deepStrictEqual(parseInput(others[0]!), { _tag: "Script", steps: [{ delta: "quote \" inside" }] })
    assert.deepStrictEqual(parseInput(others[8]!), { _tag: "Script", steps: [{ delta: "a", phase: "p" }] })
    assert.deepStrictEqual(parseInput(others[10]!), { _tag: "Echo", text: others[10]! })
    assert.deepStrictEqual(parseInput(others[16]!), { _tag: "InvalidScript", index: 0 })
  })
})
