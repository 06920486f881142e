/**
 * Issue #17, the operator API's id parameter and body bounds over a real loopback dev Core: a device id valid
 * per the protocol (non-blank, up to 128 bytes) reaches its route (the router's default parameter bound of
 * 100 characters answered 404), a longer one is a 400 that never echoes it, an id with control characters is
 * never logged raw, and a body nested beyond the wire bound is a 400 before any schema or Runtime sees it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { Limits } from "../../../src/proto/index.js"
import { captureLogs } from "../gateway/helpers.js"
import { operatorRequest } from "../../support/operatorRequest.js"

const token = Redacted.make("awop_ids-operator-token")

interface Answer {
  readonly status: number
  readonly text: string
}

const withCore = <A, E>(body: (call: (method: string, path: string, json?: string) => Effect.Effect<Answer>) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-opids-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const context = yield* Layer.build(DevCore.layer({ dataDir: dir, operatorToken: token, ids: DevIds.layerTest }))
    const core = Context.get(context, DevCore.DevCore)
    const request = operatorRequest(core.url, token)
    const call = (method: string, path: string, json?: string): Effect.Effect<Answer> => request(method, path, json)
    return yield* body(call)
  }))

const devicePath = (id: string, suffix = "") => `/devices/${encodeURIComponent(id)}${suffix}`

describe("operator device-id parameter", () => {
  it.effect("accepts ids of 101 and 128 bytes on every device route, and answers 129 bytes with a 400 that does not echo it", () =>
    withCore((call) =>
      Effect.gen(function*() {
        for (const size of [101, Limits.MaxCorrelationIdBytes]) {
          const id = "d".repeat(size)
          assert.strictEqual((yield* call("POST", devicePath(id, "/credential"))).status, 201, `${size} bytes`)
          assert.strictEqual((yield* call("GET", devicePath(id))).status, 200, `${size} bytes`)
          assert.strictEqual((yield* call("DELETE", devicePath(id, "/credential"))).status, 200, `${size} bytes`)
        }
        const tooLong = "e".repeat(Limits.MaxCorrelationIdBytes + 1)
        for (const [method, path] of [["POST", devicePath(tooLong, "/credential")], ["GET", devicePath(tooLong)], ["DELETE", devicePath(tooLong, "/credential")]] as const) {
          const answer = yield* call(method, path)
          assert.strictEqual(answer.status, 400, `${method} ${path.length}`)
          assert.strictEqual(JSON.parse(answer.text).error, "invalid_request")
          assert.notInclude(answer.text, tooLong)
        }
        // A multi-byte id: 43 × 3 bytes = 129 bytes in 43 characters.
        assert.strictEqual((yield* call("GET", devicePath("€".repeat(43)))).status, 400)
      })))

  it.effect("never writes an id's control characters raw into Core's log", () => {
    const logs = captureLogs()
    return withCore((call) =>
      Effect.gen(function*() {
        const id = "dev\u001b[31m\nforged=1"
        assert.strictEqual((yield* call("POST", devicePath(id, "/credential"))).status, 201)
        assert.strictEqual((yield* call("DELETE", devicePath(id, "/credential"))).status, 200)
        const mentions = logs.lines.filter((line) => line.includes("forged"))
        assert.isAtLeast(mentions.length, 2)
        for (const line of mentions) {
          const annotations = JSON.parse(line).annotations as Record<string, unknown>
          // eslint-disable-next-line no-control-regex
          assert.notMatch(String(annotations["device_id"]), /[\u0000-\u001f\u007f]/)
        }
      })).pipe(Effect.provide(logs.layer))
  })
})

describe("operator body bounds", () => {
  it.effect("refuses a Session whose agent_options nest 5,000 deep with 400, and keeps serving", () =>
    withCore((call) =>
      Effect.gen(function*() {
        const deep = "[".repeat(5000) + "]".repeat(5000)
        const answer = yield* call("POST", "/sessions", `{"agent_kind":"scripted","configuration":{"agent_options":{"x":${deep}}}}`)
        assert.strictEqual(answer.status, 400)
        assert.strictEqual(JSON.parse(answer.text).error, "invalid_request")
        const atLimit = "[".repeat(Limits.MaxJsonDepth - 4) + "]".repeat(Limits.MaxJsonDepth - 4)
        const ok = yield* call("POST", "/sessions", `{"agent_kind":"scripted","configuration":{"agent_options":{"x":${atLimit}}}}`)
        assert.strictEqual(ok.status, 201)
        assert.strictEqual((yield* call("GET", "/devices")).status, 200)
      })))
})
