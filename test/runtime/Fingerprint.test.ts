/**
 * Fingerprints (duplicate detection, Executor reuse): equal exactly when the canonical encodings are equal,
 * including long strings, which are hashed as raw text behind a length marker instead of as their JSON escape.
 */
import { assert, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { Canonical } from "../../src/proto/index.js"
import { configurationFingerprint, fingerprint } from "../../src/runtime/Fingerprint.js"

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const long = (s: string, n = 300) => s.repeat(Math.ceil(n / s.length)).slice(0, n)
const script = JSON.stringify({ script: Array.from({ length: 50 }, () => ({ delta: "The parser accepts \"quotes\" " })) })

const samples: ReadonlyArray<unknown> = [
  null,
  "x",
  long("a"),
  long("a", 255),
  long("a", 256),
  long("a", 257),
  long("a") + "\u0000",
  "\u0000" + long("a"),
  `\u0000300:${long("a")}`,
  long("é€😀"),
  long("é€😀").slice(0, 299),
  long("a", 299) + "\ud800", // a lone surrogate: not well-formed, hashed as its JSON escape
  long("a", 299) + "\ufffd", // what the lone surrogate would become as UTF-8
  long("a", 299) + "\udc00",
  [long("a"), long("a")],
  [long("a") + long("a")],
  [long("a"), "b"],
  [long("a"), long("b")],
  [long("a") + ",\u0000:" + long("b")], // the same bytes as the line above if the marker carried no length
  [long("a") + ",\u0000300:" + long("b")],
  [long("a") + "\",\"b"],
  { a: long("x"), b: 1 },
  { b: 1, a: long("x") },
  { a: long("x") },
  { [long("k")]: long("v") },
  { input: [{ content: [{ type: "input_text", text: script }] }], run_id: "r" },
  { input: [{ content: [{ type: "input_text", text: script + " " }] }], run_id: "r" },
  { input: [{ content: [{ type: "input_text", text: script }] }], run_id: "s" },
  [1, "1", true, null, { n: 1.5 }]
]

describe("Fingerprint.fingerprint", () => {
  it("is equal exactly when the canonical encodings are equal", () => {
    for (const a of samples) {
      for (const b of samples) {
        const same = Canonical.canonicalJson(a) === Canonical.canonicalJson(b)
        assert.strictEqual(fingerprint(a) === fingerprint(b), same, `${JSON.stringify(a)?.slice(0, 40)} / ${JSON.stringify(b)?.slice(0, 40)}`)
      }
    }
  })

  it("does not depend on key order, with long strings at any depth", () => {
    const a = { z: [{ q: long("q"), p: 2 }], a: { text: long("t"), n: null } }
    const b = { a: { n: null, text: long("t") }, z: [{ p: 2, q: long("q") }] }
    assert.strictEqual(fingerprint(a), fingerprint(b))
  })

  it("is the SHA-256 of the canonical encoding when no string is long", () => {
    const value = { b: [1, "é", null], a: { y: "short", x: long("a", 255) } }
    assert.strictEqual(fingerprint(value), sha256(Canonical.canonicalJson(value)))
  })

  it("keys the Executor configuration without its per-Turn members", () => {
    const config = { agent_kind: "scripted", run_id: "r1", input: [], agent_session_id: "s1" }
    const other = { agent_kind: "scripted", run_id: "r2", input: [{ content: [] }] }
    assert.strictEqual(
      configurationFingerprint(config as never),
      configurationFingerprint(other as never)
    )
    assert.notStrictEqual(configurationFingerprint(config as never), configurationFingerprint({ agent_kind: "x" } as never))
  })
})
