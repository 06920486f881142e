/**
 * The operator HTTP API over a real loopback server in this process (the dev Core layer on port 0, ids from
 * the test layer). No daemon: Turn delivery is covered by Turns.test.ts and the end-to-end tests.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { digestCredential } from "../../../src/core/DeviceCredentials.js"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as OperatorToken from "../../../src/core/dev/OperatorToken.js"
import { SqlClient } from "effect/sql"
import { operatorRequest } from "../../support/operatorRequest.js"

const token = Redacted.make("awop_test-operator-token")

/** Runs `body` against a fresh dev Core in a temporary data directory. */
const withCore = <A, E>(body: (call: (method: string, path: string, options?: { body?: unknown; token?: string }) => Effect.Effect<{ status: number; body: any }>, context: Context.Context<DevCore.DevCoreServices>) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-opapi-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const context = yield* Layer.build(DevCore.layer({ dataDir: dir, operatorToken: token, ids: DevIds.layerTest }))
    const core = Context.get(context, DevCore.DevCore)
    const request = operatorRequest(core.url, token)
    const call = (method: string, path: string, options: { body?: unknown; token?: string } = {}) =>
      request(method, path, options.body, options.token === undefined ? {} : { token: options.token }).pipe(
        Effect.map(({ body, status }) => ({ status, body }))
      )
    return yield* body(call, context)
  }))

describe("OperatorApi", () => {
  it.effect("requires the operator token on every route and accepts nothing else", () =>
    withCore((call) =>
      Effect.gen(function* () {
        const created = yield* call("POST", "/devices/dev-1/credential")
        assert.strictEqual(created.status, 201)
        for (const t of ["", "awop_wrong", created.body.credential as string]) {
          const res = yield* call("GET", "/devices", { token: t })
          assert.deepStrictEqual(res, { status: 401, body: { error: "unauthorized", detail: "Authorization: Bearer <operator token> required" } })
        }
        assert.strictEqual((yield* call("GET", "/devices")).status, 200)
      })))

  it.effect("returns a new credential once and stores only its digest; revoking an unknown device is 404", () =>
    withCore((call, context) =>
      Effect.gen(function* () {
        const created = yield* call("POST", "/devices/dev-1/credential")
        assert.strictEqual(created.body.device_id, "dev-1")
        assert.match(created.body.credential, /^awdc_/)
        const sql = Context.get(context, SqlClient.SqlClient)
        const rows = yield* Effect.orDie(sql`SELECT digest FROM device_credentials WHERE device_id = 'dev-1'`)
        assert.deepStrictEqual(rows.map((r) => r.digest), [digestCredential(Redacted.make(created.body.credential))])
        const device = yield* call("GET", "/devices/dev-1")
        assert.deepStrictEqual(
          [device.body.online, device.body.has_credential, device.body.declaration, JSON.stringify(device.body).includes("awdc_")],
          [false, true, null, false]
        )
        assert.strictEqual((yield* call("DELETE", "/devices/nope/credential")).status, 404)
        assert.deepStrictEqual((yield* call("DELETE", "/devices/dev-1/credential")).body, { device_id: "dev-1", revoked: true, disconnected: false })
        assert.strictEqual((yield* call("POST", "/devices/%20/credential")).status, 400)
      })))

  it.effect("creates a Session, never returning agent_options, and refuses invalid bodies before anything happens", () =>
    withCore((call) =>
      Effect.gen(function* () {
        const created = yield* call("POST", "/sessions", {
          body: { agent_kind: "scripted", configuration: { agent_options: { api_key: "sk-secret" }, text_verbosity: "high" } }
        })
        assert.strictEqual(created.status, 201)
        assert.deepStrictEqual(created.body, {
          session_id: "session-1",
          agent_kind: "scripted",
          environment: { type: "none" },
          configuration: { text_verbosity: "high", agent_options_set: true },
          device_id: null,
          native_session_id: null,
          created_at_ms: 0,
          initialization: null
        })
        const read = yield* call("GET", "/sessions/session-1")
        assert.notInclude(JSON.stringify(read.body), "sk-secret")
        assert.deepStrictEqual(read.body.turns, [])
        const unknownMember = yield* call("POST", "/sessions", { body: { agent_kind: "scripted", model: "x" } })
        assert.strictEqual(unknownMember.status, 400)
        assert.strictEqual((yield* call("POST", "/sessions", { body: "{not json" })).status, 400)
        const duplicateTools = yield* call("POST", "/sessions", {
          body: {
            agent_kind: "scripted",
            configuration: {
              function_tools: [
                { name: "f", description: "", parameters: {} },
                { name: "f", description: "", parameters: {} }
              ]
            }
          }
        })
        assert.deepStrictEqual(duplicateTools, { status: 400, body: { error: "invalid_request", detail: "configuration: duplicate_function" } })
        assert.strictEqual((yield* call("POST", "/sessions", { body: { agent_kind: "scripted", device_id: "ghost" } })).status, 404)
      })))

  it.effect("refuses a Turn no online device admits (422) and records nothing; unknown Turns are 404", () =>
    withCore((call) =>
      Effect.gen(function* () {
        yield* call("POST", "/sessions", { body: { agent_kind: "scripted" } })
        const refused = yield* call("POST", "/sessions/session-1/turns", { body: { input: [{ content: [{ type: "input_text", text: "hi" }] }] } })
        assert.deepStrictEqual(refused.status, 422)
        assert.strictEqual(refused.body.error, "harness_unavailable")
        assert.deepStrictEqual((yield* call("GET", "/sessions/session-1")).body.turns, [])
        const empty = yield* call("POST", "/sessions/session-1/turns", { body: { input: [] } })
        assert.deepStrictEqual(empty, { status: 400, body: { error: "invalid_request", detail: "input: empty_input" } })
        assert.strictEqual((yield* call("POST", "/sessions/nope/turns", { body: { input: [{ content: [{ type: "input_text", text: "hi" }] }] } })).status, 404)
        for (const [method, path] of [
          ["GET", "/turns/nope"],
          ["GET", "/turns/nope/outcome"],
          ["GET", "/turns/nope/events"],
          ["POST", "/turns/nope/cancel"]
        ] as const) {
          assert.strictEqual((yield* call(method, path)).status, 404, path)
        }
        const steer = yield* call("POST", "/turns/nope/steer", { body: { input: [{ content: [{ type: "input_text", text: "x" }] }] } })
        assert.strictEqual(steer.status, 404)
      })))
})

describe("OperatorToken", () => {
  it.effect("generates the token once into a 0600 file and reads the same token afterwards", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-token-"))
      try {
        const first = yield* OperatorToken.loadOrCreate(dir)
        const second = yield* OperatorToken.loadOrCreate(dir)
        assert.strictEqual(Redacted.value(first), Redacted.value(second))
        assert.match(Redacted.value(first), /^awop_/)
        assert.strictEqual(statSync(OperatorToken.tokenFile(dir)).mode & 0o777, 0o600)
        assert.isTrue(OperatorToken.matches(first, Redacted.value(first)))
        assert.isFalse(OperatorToken.matches(first, Redacted.value(first) + "x"))
        assert.notInclude(String(first), Redacted.value(first))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("refuses an empty or unreadable token file with what went wrong, never the token", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "agentwire-token-"))
      try {
        const empty = join(dir, "empty")
        writeFileSync(empty, "  \n")
        assert.deepStrictEqual(
          yield* Effect.flip(OperatorToken.readFile(empty)),
          new OperatorToken.OperatorTokenUnavailable({ path: empty, reason: "empty" })
        )
        const missing = join(dir, "missing")
        assert.deepStrictEqual(
          yield* Effect.flip(OperatorToken.readFile(missing)),
          new OperatorToken.OperatorTokenUnavailable({ path: missing, reason: "read_failed" })
        )
        const given = join(dir, "given")
        writeFileSync(given, "awop_given-token\n")
        assert.strictEqual(Redacted.value(yield* OperatorToken.readFile(given)), "awop_given-token")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
