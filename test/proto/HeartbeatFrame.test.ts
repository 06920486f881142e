/**
 * The heartbeat fast path (`HeartbeatFrame`): a template made from an accepted heartbeat matches a later frame
 * only when the generic decoder (`Messages.decodeRuntimeToCore`) accepts that frame too, and then gives exactly
 * the generic decoder's message and frame size. Checked on fixed cases and on seeded random edits of several
 * heartbeat texts (numbers swapped for valid and invalid tokens, characters inserted, removed or replaced
 * anywhere); the fast path never refuses, so every refusal stays the generic decoder's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Capabilities, HeartbeatFrame, Messages } from "../../src/proto/index.js"
import { utf8Bytes } from "./support/frames.js"

const capabilities = Object.fromEntries(Capabilities.capabilityNames.map((n, i) => [n, i % 3 === 0]))
const kinds = [{ kind: "scripted", available: true, version: "1.0.0", capabilities }]

/** Accepted heartbeat texts of different shapes (member order, spacing, escapes, envelope extras). */
const bases: ReadonlyArray<string> = [
  JSON.stringify({ type: "heartbeat", payload: { ts: 1764720000, active_requests: 0, daemon_version: "bench", supported_agent_kinds: kinds } }),
  JSON.stringify({ type: "heartbeat", payload: { active_requests: 7, supported_agent_kinds: kinds, ts: 5 }, trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
  JSON.stringify({ id: "ignored", type: "heartbeat", extra: { ts: 9, nested: ["a", { active_requests: 1 }] }, payload: { ts: 0, active_requests: 12 } }),
  `{ "type" : "heartbeat" , "payload" : { "ts" : 42 , "daemon_version" : "v\\"ts\\":1" , "active_requests" : 3 } }`,
  `{"type":"heartbeat","p\\u0061yload":{"t\\u0073":100,"active_requests":0,"daemon_version":"é✓"}}`,
  JSON.stringify({ type: "heartbeat", payload: { ts: 1, active_requests: 0, supported_agent_kinds: [] } })
]

const generic = (text: string) => Messages.decodeRuntimeToCore(text)

const templateOf = (text: string): HeartbeatFrame.HeartbeatTemplate => {
  const decoded = generic(text)
  assert.isTrue(Result.isSuccess(decoded), `base frame must decode: ${text}`)
  const message = (decoded as Result.Success<Messages.RuntimeToCore, never>).success
  assert.strictEqual(message.type, "heartbeat")
  const t = HeartbeatFrame.template(text, message as HeartbeatFrame.Heartbeat)
  assert.isDefined(t, `a template for ${text}`)
  return t!
}

/** Checks the fast path against the generic decoder on one frame; returns whether the fast path took it. */
const agrees = (t: HeartbeatFrame.HeartbeatTemplate, text: string): boolean => {
  const fast = HeartbeatFrame.match(t, text)
  if (fast === undefined) return false
  const slow = generic(text)
  assert.isTrue(Result.isSuccess(slow), `fast path took a frame the generic decoder refuses: ${text}`)
  assert.deepStrictEqual(fast, (slow as Result.Success<Messages.RuntimeToCore, never>).success, text)
  assert.strictEqual(HeartbeatFrame.matchedBytes(t, text), utf8Bytes(text), text)
  return true
}

/** The base text with the values of `payload.ts` and `payload.active_requests` replaced by raw tokens. */
const withNumbers = (t: HeartbeatFrame.HeartbeatTemplate, ts: string, active: string): string =>
  t.tsFirst ? t.prefix + ts + t.middle + active + t.suffix : t.prefix + active + t.middle + ts + t.suffix

/** A small seeded generator (mulberry32), so a failure reproduces. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296
}

const tokens = [
  "0", "1", "9", "10", "1764720001", "999999999999999", "1000000000000000", "9007199254740993", "01", "00", "-1", "-0",
  "1.5", "1.0", "1e3", "1E3", "2.", "", " 1", "1 ", "null", "true", '"1"', "[1]", "{}", "0x10", "١"
]

describe("HeartbeatFrame", () => {
  it("matches a repeated heartbeat with new liveness numbers and gives the generic decoder's message", () => {
    for (const base of bases) {
      const t = templateOf(base)
      assert.isTrue(agrees(t, base), base)
      assert.isTrue(agrees(t, withNumbers(t, "1764720015", "2")), base)
      assert.isTrue(agrees(t, withNumbers(t, "0", "999999999999999")), base)
      const message = HeartbeatFrame.match(t, withNumbers(t, "77", "5"))!
      assert.strictEqual(message.payload.ts, 77)
      assert.strictEqual(message.payload.active_requests, 5)
    }
  })

  it("leaves every number that is not a plain decimal of at most 15 digits to the generic decoder", () => {
    const t = templateOf(bases[0]!)
    for (const token of ["1000000000000000", "9007199254740993", "01", "00", "-1", "-0", "1.5", "1.0", "1e3", "", " 1", "null", '"1"']) {
      assert.isUndefined(HeartbeatFrame.match(t, withNumbers(t, token, "0")), token)
      assert.isUndefined(HeartbeatFrame.match(t, withNumbers(t, "1", token)), token)
    }
  })

  it("agrees with the generic decoder on every pair of number tokens, valid or not", () => {
    for (const base of bases) {
      const t = templateOf(base)
      let taken = 0
      for (const a of tokens) for (const b of tokens) if (agrees(t, withNumbers(t, a, b))) taken++
      // 0, 1, 9, 10, 1764720001, 999999999999999 in both places
      assert.strictEqual(taken, 36, base)
    }
  })

  it("agrees with the generic decoder on random edits anywhere in the frame", () => {
    const next = random(18)
    const alphabet = ['"', "\\", "{", "}", "[", "]", ":", ",", " ", "0", "1", "-", ".", "e", "t", "s", "a", "u", "x"]
    let taken = 0
    for (const base of bases) {
      const t = templateOf(base)
      for (let round = 0; round < 400; round++) {
        let text = withNumbers(t, String(Math.floor(next() * 1e9)), String(Math.floor(next() * 50)))
        const edits = 1 + Math.floor(next() * 3)
        for (let e = 0; e < edits; e++) {
          const at = Math.floor(next() * (text.length + 1))
          const c = alphabet[Math.floor(next() * alphabet.length)]!
          const kind = Math.floor(next() * 3)
          text = kind === 0 ? text.slice(0, at) + c + text.slice(at) : kind === 1 ? text.slice(0, at) + text.slice(at + 1) : text.slice(0, at) + c + text.slice(at + 1)
        }
        if (agrees(t, text)) taken++
      }
    }
    // Edits inside the numbers keep some frames on the fast path; the assertion above holds for every one.
    assert.isAbove(taken, 0)
  })

  it("makes no template when payload, ts or active_requests occur twice (JSON.parse keeps the last)", () => {
    const cases = [
      `{"type":"heartbeat","payload":{"ts":1,"ts":2,"active_requests":0}}`,
      `{"type":"heartbeat","payload":{"ts":1,"active_requests":0,"active_requests":1}}`,
      `{"type":"heartbeat","payload":{"ts":1,"active_requests":0},"payload":{"ts":3,"active_requests":0}}`,
      `{"type":"heartbeat","payload":{"ts":1,"active_requests":0},"p\\u0061yload":{"ts":3,"active_requests":0}}`
    ]
    for (const text of cases) {
      const decoded = generic(text)
      assert.isTrue(Result.isSuccess(decoded), text)
      const message = (decoded as Result.Success<Messages.RuntimeToCore, never>).success as HeartbeatFrame.Heartbeat
      assert.isUndefined(HeartbeatFrame.template(text, message), text)
    }
  })

  it("makes no template from a frame over MaxTemplateChars", () => {
    const pad = "x".repeat(HeartbeatFrame.MaxTemplateChars)
    const text = JSON.stringify({ type: "heartbeat", payload: { ts: 1, active_requests: 0, daemon_version: pad } })
    const message = (generic(text) as Result.Success<Messages.RuntimeToCore, never>).success as HeartbeatFrame.Heartbeat
    assert.isUndefined(HeartbeatFrame.template(text, message))
  })

  it("splits the text exactly and counts the fixed part's UTF-8 bytes", () => {
    const t = templateOf(bases[0]!)
    assert.strictEqual(t.prefix + "1" + t.middle + "0" + t.suffix, withNumbers(t, "1", "0"))
    assert.strictEqual(t.fixedBytes, utf8Bytes(t.prefix + t.middle + t.suffix))
  })
})

describe("HeartbeatFrame shared templates", () => {
  it("gives connections whose heartbeats have the same parts one template, and different parts their own", () => {
    const a = templateOf(bases[0]!)
    const b = templateOf(bases[0]!.replace("1764720000", "1764720099"))
    assert.strictEqual(a, b)
    assert.notStrictEqual(a, templateOf(bases[0]!.replace('"bench"', '"other"')))
    // A template from a shared one still gives each frame its own numbers.
    assert.strictEqual(HeartbeatFrame.match(b, withNumbers(b, "5", "6"))!.payload.ts, 5)
  })

  it("stays bounded: past MaxSharedTemplates it starts over, and every template still matches its own frames", () => {
    const made: Array<[HeartbeatFrame.HeartbeatTemplate, string]> = []
    for (let i = 0; i < HeartbeatFrame.MaxSharedTemplates + 10; i++) {
      const text = JSON.stringify({ type: "heartbeat", payload: { ts: 1, active_requests: 0, daemon_version: `v${i}` } })
      made.push([templateOf(text), text.replace('"ts":1', '"ts":2')])
    }
    for (const [t, text] of made) assert.isTrue(agrees(t, text))
  })
})
