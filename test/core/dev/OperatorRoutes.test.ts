/**
 * The operator API's list, probe and method rules over a real loopback server in this process (the dev Core
 * layer on port 0): `GET /turns` pages newest first with an opaque cursor and filters, `/healthz` and
 * `/readyz` answer without a token, and a known path answers another method with 405 and `Allow`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { TurnStore } from "../../../src/core/dev/TurnStore.js"
import { MessageInput } from "../../../src/proto/index.js"

const token = Redacted.make("awop_test-operator-token")

type Call = (method: string, path: string, options?: { token?: string; body?: unknown }) => Effect.Effect<{ status: number; body: any; allow: string | null }>

const withCore = <A, E>(body: (call: Call, context: Context.Context<DevCore.DevCoreServices>) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-oproutes-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const context = yield* Layer.build(DevCore.layer({ dataDir: dir, operatorToken: token, ids: DevIds.layerTest }))
    const core = Context.get(context, DevCore.DevCore)
    const call: Call = (method, path, options = {}) =>
      Effect.promise(async () => {
        const res = await fetch(`${core.url}${path}`, {
          method,
          headers: options.token === "" ? {} : { authorization: `Bearer ${options.token ?? Redacted.value(token)}` },
          ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
        })
        const text = await res.text()
        return { status: res.status, body: text === "" ? undefined : JSON.parse(text), allow: res.headers.get("allow") }
      })
    return yield* body(call, context)
  }))

const input = MessageInput.text("hi")

describe("operator routes", () => {
  it.effect("GET /turns pages newest first with a cursor, never repeating or skipping, and filters", () =>
    withCore((call, context) =>
      Effect.gen(function* () {
        const store = Context.get(context, TurnStore)
        const session = yield* call("POST", "/api/v1/operator/sessions", { body: { agent_kind: "scripted" } })
        assert.strictEqual(session.status, 201)
        const sessionId = session.body.session_id as string
        const created: Array<string> = []
        for (let i = 0; i < 5; i++) {
          // two Turns share a millisecond: the turn_id breaks the tie
          if (i !== 3) yield* TestClock.adjust(1)
          const id = `turn-${i}`
          yield* store.create({ turnId: id, sessionId, runId: `run-${i}`, input })
          created.push(id)
        }
        const first = yield* call("GET", "/api/v1/operator/turns?limit=2")
        assert.strictEqual(first.status, 200)
        assert.deepStrictEqual(first.body.turns.map((t: any) => t.turn_id), ["turn-4", "turn-3"])
        assert.isString(first.body.next_cursor)
        const second = yield* call("GET", `/api/v1/operator/turns?limit=2&cursor=${first.body.next_cursor}`)
        assert.deepStrictEqual(second.body.turns.map((t: any) => t.turn_id), ["turn-2", "turn-1"])
        const third = yield* call("GET", `/api/v1/operator/turns?limit=2&cursor=${second.body.next_cursor}`)
        assert.deepStrictEqual(third.body, { turns: [third.body.turns[0]], next_cursor: null })
        assert.strictEqual(third.body.turns[0].turn_id, "turn-0")
        // a full page that is also the last one has no next cursor
        assert.strictEqual((yield* call("GET", "/api/v1/operator/turns?limit=5")).body.next_cursor, null)
        assert.strictEqual((yield* call("GET", "/api/v1/operator/turns")).body.turns.length, 5)
        assert.deepStrictEqual((yield* call("GET", "/api/v1/operator/turns?status=completed")).body, { turns: [], next_cursor: null })
        assert.strictEqual((yield* call("GET", `/api/v1/operator/turns?session_id=${sessionId}&status=queued`)).body.turns.length, 5)
        assert.deepStrictEqual((yield* call("GET", "/api/v1/operator/turns?session_id=other")).body.turns, [])
      }).pipe(Effect.orDie)))

  it.effect("GET /sessions/:id embeds the latest page of Turns (oldest first) and a cursor to the older ones", () =>
    withCore((call, context) =>
      Effect.gen(function* () {
        const store = Context.get(context, TurnStore)
        const session = yield* call("POST", "/api/v1/operator/sessions", { body: { agent_kind: "scripted" } })
        const sessionId = session.body.session_id as string
        const few = yield* call("GET", `/api/v1/operator/sessions/${sessionId}`)
        assert.deepStrictEqual([few.body.turns, few.body.turns_next_cursor], [[], null])
        for (let i = 0; i < 53; i++) {
          yield* TestClock.adjust(1)
          yield* store.create({ turnId: `turn-${String(i).padStart(2, "0")}`, sessionId, runId: `run-${i}`, input })
        }
        const read = yield* call("GET", `/api/v1/operator/sessions/${sessionId}`)
        assert.strictEqual(read.status, 200)
        const ids = read.body.turns.map((t: any) => t.turn_id)
        assert.strictEqual(ids.length, 50)
        assert.deepStrictEqual([ids[0], ids[49]], ["turn-03", "turn-52"])
        const older = yield* call("GET", `/api/v1/operator/turns?session_id=${sessionId}&cursor=${read.body.turns_next_cursor}`)
        assert.deepStrictEqual(older.body.turns.map((t: any) => t.turn_id), ["turn-02", "turn-01", "turn-00"])
        assert.strictEqual(older.body.next_cursor, null)
      }).pipe(Effect.orDie)))

  it.effect("GET /turns refuses a bad limit, status or cursor with a 400 that does not echo it", () =>
    withCore((call) =>
      Effect.gen(function* () {
        for (const query of ["limit=0", "limit=201", "limit=x", "status=<script>", "cursor=%3Cscript%3E", `cursor=${"A".repeat(500)}`]) {
          const res = yield* call("GET", `/api/v1/operator/turns?${query}`)
          assert.strictEqual(res.status, 400, query)
          assert.strictEqual(res.body.error, "invalid_request")
          assert.notInclude(res.body.detail, "<script>")
          assert.notInclude(res.body.detail, "AAAA")
        }
        assert.strictEqual((yield* call("GET", "/api/v1/operator/turns?limit=200")).status, 200)
        assert.strictEqual((yield* call("GET", "/api/v1/operator/turns?limit=1")).status, 200)
        assert.strictEqual((yield* call("GET", "/api/v1/operator/turns", { token: "" })).status, 401)
      })))

  it.effect("GET /devices and GET /sessions page oldest first with a cursor, never repeating or skipping", () =>
    withCore((call) =>
      Effect.gen(function* () {
        const devices: Array<string> = []
        const sessions: Array<string> = []
        for (let i = 0; i < 5; i++) {
          // two records share a millisecond: the id breaks the tie
          if (i !== 3) yield* TestClock.adjust(1)
          const device = `dev-${i}`
          assert.strictEqual((yield* call("POST", `/api/v1/operator/devices/${device}/credential`)).status, 201)
          devices.push(device)
          const session = yield* call("POST", "/api/v1/operator/sessions", { body: { agent_kind: "scripted" } })
          sessions.push(session.body.session_id as string)
        }
        const walk = (path: string, key: string, idKey: string) =>
          Effect.gen(function* () {
            const seen: Array<string> = []
            const sizes: Array<number> = []
            let cursor: string | null = null
            do {
              const page: { status: number; body: any } = yield* call(
                "GET",
                `${path}?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`
              )
              assert.strictEqual(page.status, 200)
              sizes.push(page.body[key].length)
              seen.push(...page.body[key].map((x: any) => String(x[idKey])))
              cursor = page.body.next_cursor
            } while (cursor !== null)
            return { seen, sizes }
          })
        const d = yield* walk("/api/v1/operator/devices", "devices", "device_id")
        assert.deepStrictEqual(d, { seen: devices, sizes: [2, 2, 1] })
        const s = yield* walk("/api/v1/operator/sessions", "sessions", "session_id")
        assert.deepStrictEqual(s, { seen: sessions, sizes: [2, 2, 1] })
        // No limit: the default page (50), all five here, and no next page.
        const all = yield* call("GET", "/api/v1/operator/devices")
        assert.deepStrictEqual([all.body.devices.length, all.body.next_cursor], [5, null])
        // Bad limits and cursors are 400s that do not echo the value.
        for (const query of ["limit=0", "limit=201", "limit=x", "cursor=not-a-cursor-%3Cscript%3E"]) {
          for (const path of ["/api/v1/operator/devices", "/api/v1/operator/sessions"]) {
            const bad = yield* call("GET", `${path}?${query}`)
            assert.strictEqual(bad.status, 400, `${path}?${query}`)
            assert.notInclude(JSON.stringify(bad.body), "script")
          }
        }
      })))

  it.effect("/healthz and /readyz answer without a token and carry nothing but the status", () =>
    withCore((call) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(yield* call("GET", "/healthz", { token: "" }), { status: 200, body: { status: "ok" }, allow: null })
        assert.deepStrictEqual(yield* call("GET", "/readyz", { token: "" }), { status: 200, body: { status: "ready" }, allow: null })
        const post = yield* call("POST", "/healthz", { token: "" })
        assert.deepStrictEqual([post.status, post.allow], [405, "GET"])
      })))

  it.effect("a known path answers another method with 405 and Allow (after authorization); unknown paths stay 404", () =>
    withCore((call) =>
      Effect.gen(function* () {
        const sessions = yield* call("DELETE", "/api/v1/operator/sessions")
        assert.deepStrictEqual(sessions, {
          status: 405,
          body: { error: "method_not_allowed", detail: "allowed: POST, GET" },
          allow: "POST, GET"
        })
        const cancel = yield* call("GET", "/api/v1/operator/turns/turn-x/cancel")
        assert.deepStrictEqual([cancel.status, cancel.allow], [405, "POST"])
        const credential = yield* call("PUT", "/api/v1/operator/devices/dev-1/credential")
        assert.deepStrictEqual([credential.status, credential.allow], [405, "POST, DELETE"])
        assert.strictEqual((yield* call("DELETE", "/api/v1/operator/sessions", { token: "" })).status, 401)
        assert.strictEqual((yield* call("GET", "/api/v1/operator/nothing-here")).status, 404)
      })))
})
