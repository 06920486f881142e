/**
 * MCP servers in a Session's configuration, with bearer secrets encrypted at rest (issue #14): the operator API
 * accepts them, refuses what the common validator refuses, stores only `bearer_set` in the configuration and the
 * secret AES-256-GCM-encrypted (random nonce per secret, the Session and position as additional data) under a
 * 0600 key file in the data directory; the secret never appears in a response, a log line or the database files;
 * a missing or wrong key is a typed `McpSecretUnavailable`, never a crash. Real loopback HTTP (like
 * OperatorApi.test.ts); no daemon.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Logger, Redacted, References } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { KeyFileName, McpSecrets, open, seal } from "../../../src/core/dev/McpSecrets.js"
import { agentConfiguration, executionSpec, sealedBearerIndexes, type SessionConfiguration } from "../../../src/core/dev/SessionConfig.js"
import { configuration as requestConfiguration } from "../../../src/core/ExecutionRequest.js"
import { scriptedCapabilities } from "../../../scenarios/Fixtures.js"
import { operatorRequest } from "../../support/operatorRequest.js"

const token = Redacted.make("awop_test-operator-token")
const Bearer = "mcp-bearer-at-rest-5d1c9e"

const servers = [
  { server_label: "tickets", server_url: "https://mcp.example.org/mcp", allowed_tools: ["lookup"], required: true, bearer_token: Bearer },
  { server_label: "docs", server_url: "http://127.0.0.1:9/mcp", allowed_tools: null }
]

type Call = (method: string, path: string, body?: unknown) => Effect.Effect<{ status: number; text: string; body: any }>

/** A dev Core in `dir` (kept by the caller), its log lines captured. */
const withCore = <A, E>(dir: string, body: (call: Call, context: Context.Context<DevCore.DevCoreServices>, logs: Array<string>) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const logs: Array<string> = []
    const capture = Logger.make((o) => {
      logs.push(JSON.stringify([o.message, o.cause, Object.values(o.fiber.getRef(References.CurrentLogAnnotations))], (_k, v) => (typeof v === "bigint" ? String(v) : v)))
    })
    const context = yield* Layer.build(
      DevCore.layer({ dataDir: dir, operatorToken: token, ids: DevIds.layerTest }).pipe(Layer.provide(Logger.layer([capture])))
    )
    const core = Context.get(context, DevCore.DevCore)
    const call: Call = operatorRequest(core.url, token)
    return yield* body(call, context, logs).pipe(Effect.provide(Logger.layer([capture])))
  }))

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agentwire-mcp-secrets-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Every byte the store left in the data directory (the database and its journal files). */
const dataBytes = (dir: string) =>
  Buffer.concat(readdirSync(dir).filter((f) => f !== KeyFileName).flatMap((f) => {
    try {
      return [readFileSync(join(dir, f))]
    } catch {
      return []
    }
  }))

describe("MCP servers in Session configuration, bearer secrets at rest", () => {
  it("AES-256-GCM: a fresh nonce per secret; the Session and position are bound; a wrong key does not open", () =>
    Effect.runPromise(Effect.gen(function* () {
      const key = Crypto.randomBytes(32)
      const a = seal(key, "s-1", 0, Redacted.make(Bearer))
      const b = seal(key, "s-1", 0, Redacted.make(Bearer))
      assert.notStrictEqual(a.nonce, b.nonce)
      assert.notStrictEqual(a.ciphertext, b.ciphertext)
      assert.notInclude(JSON.stringify(a), Bearer)
      assert.strictEqual(Redacted.value(yield* open(key, "s-1", 0, a)), Bearer)
      for (const [k, session, index] of [[Crypto.randomBytes(32), "s-1", 0], [key, "s-2", 0], [key, "s-1", 1]] as const) {
        const exit = yield* Effect.exit(open(k, session, index, a))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
        assert.strictEqual(error?._tag === "Fail" ? error.error.reason : undefined, "decrypt_failed")
      }
    })))

  it.effect("the operator API stores the bearer encrypted under a 0600 key and never returns or logs it", () =>
    Effect.scoped(Effect.gen(function* () {
      const dir = yield* tempDir
      const sessionId = yield* withCore(dir, (call, context, logs) =>
        Effect.gen(function* () {
          const created = yield* call("POST", "/sessions", { agent_kind: "scripted", configuration: { mcp_http_servers: servers } })
          assert.strictEqual(created.status, 201, created.text)
          assert.deepStrictEqual(created.body.configuration.mcp_http_servers, [
            { server_label: "tickets", server_url: "https://mcp.example.org/mcp", allowed_tools: ["lookup"], required: true, bearer: { set: true } },
            { server_label: "docs", server_url: "http://127.0.0.1:9/mcp", allowed_tools: null, bearer: { set: false } }
          ])
          const id = created.body.session_id as string
          const responses = [created.text, (yield* call("GET", `/sessions/${id}`)).text, (yield* call("GET", "/sessions")).text]
          for (const text of responses) assert.notInclude(text, Bearer)

          // The key file: 32 bytes, owner-only, created in the data directory.
          const key = statSync(join(dir, KeyFileName))
          assert.strictEqual(key.mode & 0o777, 0o600)
          assert.strictEqual(key.size, 32)

          // Decrypted only where a Turn's request is built: the admission view carries it Redacted.
          const sql = Context.get(context, SqlClient.SqlClient)
          const rows = yield* Effect.orDie(sql`SELECT configuration_json FROM sessions WHERE session_id = ${id}`)
          const stored = JSON.parse(String(rows[0]!.configuration_json)) as SessionConfiguration
          assert.notInclude(JSON.stringify(stored), Bearer)
          assert.deepStrictEqual(sealedBearerIndexes(stored), [0])
          const bearers = yield* Effect.orDie(Context.get(context, McpSecrets).open(id, sealedBearerIndexes(stored)))
          const agent = agentConfiguration(stored, bearers)
          assert.isTrue(Redacted.isRedacted(agent.mcp_http_servers[0]!.vault_credential))
          assert.strictEqual(Redacted.value(agent.mcp_http_servers[0]!.vault_credential!), Bearer)
          assert.strictEqual(agent.mcp_http_servers[1]!.vault_credential, undefined)
          assert.notInclude(JSON.stringify(agent), Bearer)
          // …and the execution configuration Core sends carries it as bearer_token (the only place in clear).
          const spec = executionSpec({ sessionId: id, agentKind: "scripted", configuration: stored, hasStartedTurn: false, nativeSessionId: undefined, mcpBearers: bearers })
          const sent = requestConfiguration(spec, { kind: "scripted", capabilities: scriptedCapabilities, required: [] })
          assert.deepStrictEqual(sent.mcp_http_servers, [
            { connection_origin: "service", server_label: "tickets", server_url: "https://mcp.example.org/mcp", allowed_tools: ["lookup"], required: true, bearer_token: Bearer },
            { connection_origin: "service", server_label: "docs", server_url: "http://127.0.0.1:9/mcp", allowed_tools: null }
          ])

          // The common validator at creation: a bearer over plain http, an environment origin without an Environment.
          const insecure = yield* call("POST", "/sessions", {
            agent_kind: "scripted",
            configuration: { mcp_http_servers: [{ ...servers[0], server_url: "http://mcp.example.org/mcp" }] }
          })
          assert.deepStrictEqual([insecure.status, insecure.body.detail], [400, "configuration: mcp_bearer_insecure"])
          const origin = yield* call("POST", "/sessions", {
            agent_kind: "scripted",
            configuration: { mcp_http_servers: [{ ...servers[1], connection_origin: "environment" }] }
          })
          assert.deepStrictEqual([origin.status, origin.body.detail], [400, "configuration: mcp_origin_environment"])
          assert.notInclude(insecure.text, Bearer)
          assert.isTrue(logs.length > 0, "log lines were captured")
          for (const line of logs) assert.notInclude(line, Bearer)
          return id
        }))
      // After the Core closed: nothing in the database files holds the secret in clear.
      assert.isFalse(dataBytes(dir).includes(Buffer.from(Bearer)), "the bearer is in the database files in clear")
      assert.isTrue(dataBytes(dir).length > 0)

      // A key others may read is refused; a missing key and a different key are typed errors, never a crash.
      const keyPath = join(dir, KeyFileName)
      const original = readFileSync(keyPath)
      const reason = (context: Context.Context<DevCore.DevCoreServices>) =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(Context.get(context, McpSecrets).open(sessionId, [0]))
          const r = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
          return r?._tag === "Fail" ? r.error.reason : "opened"
        })
      chmodSync(keyPath, 0o644)
      assert.strictEqual(yield* withCore(dir, (_c, context) => reason(context)), "key_invalid")
      rmSync(keyPath)
      assert.strictEqual(yield* withCore(dir, (_c, context) => reason(context)), "key_missing")
      writeFileSync(keyPath, Crypto.randomBytes(32), { mode: 0o600 })
      assert.strictEqual(yield* withCore(dir, (_c, context) => reason(context)), "decrypt_failed")
      rmSync(keyPath)
      writeFileSync(keyPath, original, { mode: 0o600 })
      assert.strictEqual(yield* withCore(dir, (_c, context) => reason(context)), "opened")
    })), 60_000)
})
