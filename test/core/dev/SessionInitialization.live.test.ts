/**
 * Session initialization over a real loopback dev Core with a scripted Runtime on a real WebSocket answering
 * `runtime_prepare` (no daemon: the end-to-end test with the real binary is test/e2e/session-init.live.test.ts):
 * a refusal that may clear is retried and the Turn then dispatched; a commit cut off by the connection leaves
 * the Session `initialization_unknown`, its Turn fails without any dispatch, and nothing is replayed on the
 * next connection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Redacted, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import type { Messages } from "../../../src/proto/index.js"
import { allSupported } from "../../support/capabilities.js"
import { dialOk, heartbeat, kind, type ScriptedRuntime } from "../../support/coreScriptedRuntime.js"
import { operatorRequest } from "../../support/operatorRequest.js"

const token = Redacted.make("awop_test-init-token")
const ENV = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"

type Call = (method: string, path: string, body?: unknown) => Effect.Effect<{ status: number; body: any }>
type Behaviour = "refuse_first_begin" | "drop_at_commit"

interface Peer {
  /** `runtime_prepare` frames received (`step:action`), and every other frame type, in order. */
  readonly seen: Array<string>
  readonly dropped: Deferred.Deferred<void>
}

/** Answers runtime_prepare as a bound daemon would, with one scripted misbehaviour. */
const respond = (runtime: ScriptedRuntime, peer: Peer, behaviour: Behaviour) =>
  Effect.gen(function* () {
    let refused = false
    const sizes = new Map<string, number>()
    while (true) {
      const m = yield* runtime.receive
      if (m.type !== "runtime_prepare") {
        peer.seen.push(m.type)
        continue
      }
      const p = m.payload
      peer.seen.push(`${p.step}${p.action === undefined ? "" : `:${p.action}`}`)
      const reply = (payload: Messages.MessageOfType<"runtime_prepare_result">["payload"]) =>
        runtime.send({ type: "runtime_prepare_result", id: m.id, payload })
      if (p.step === "begin") {
        if (behaviour === "refuse_first_begin" && !refused) {
          refused = true
          yield* reply({ outcome: "rejected", error_code: "resource_unavailable" })
          continue
        }
        sizes.set(m.id, p.size_bytes ?? 0)
        yield* reply({ outcome: "ready" })
      } else if (p.step === "chunk") {
        yield* reply({ outcome: "received", offset: (p.offset ?? 0) + Buffer.from(p.data!, "base64").length })
      } else {
        if (behaviour === "drop_at_commit") {
          yield* Deferred.succeed(peer.dropped, undefined)
          return yield* runtime.close(1011, "gone")
        }
        const size = sizes.get(m.id) ?? 0
        yield* reply(size === 0 ? { outcome: "completed" } : { outcome: "completed", size_bytes: size })
      }
    }
  })

const withCore = <A, E>(body: (call: Call, connect: (behaviour: Behaviour) => Effect.Effect<Peer, never, never>) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-init-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const context = yield* Layer.build(DevCore.layer({ dataDir: dir, operatorToken: token, turns: { retryDelay: "20 millis", maxRetryDelay: "20 millis" } }))
    const core = Context.get(context, DevCore.DevCore)
    const scope = yield* Effect.scope
    const call: Call = operatorRequest(core.url, token)
    const credential = (yield* call("POST", "/devices/dev-1/credential")).body.credential as string
    const connect = (behaviour: Behaviour) =>
      Effect.gen(function* () {
        const runtime = yield* dialOk({ wsUrl: `${core.url.replace(/^http/, "ws")}/api/v1/agent-daemon/ws`, deviceId: "dev-1", credential })
        yield* runtime.send(heartbeat([kind("scripted", { capabilities: allSupported() })]))
        const peer: Peer = { seen: [], dropped: yield* Deferred.make<void>() }
        yield* Effect.forkScoped(Effect.ignore(respond(runtime, peer, behaviour)))
        while (true) {
          const device = yield* call("GET", "/devices/dev-1")
          if (device.body.online === true && device.body.declaration !== null) return peer
          yield* Effect.sleep("10 millis")
        }
      }).pipe(Scope.provide(scope)) as Effect.Effect<Peer>
    return yield* body(call, connect)
  }))

const createSession = (call: Call) =>
  Effect.map(
    call("POST", "/sessions", {
      agent_kind: "scripted",
      device_id: "dev-1",
      environment: { type: "self_hosted", id: ENV, workspace_directory: "/srv/w" },
      initialization: { files: [{ path: "/workspace/a.txt", content: "hello" }], setup: { command: "make" } }
    }),
    (r) => {
      assert.strictEqual(r.status, 201, JSON.stringify(r.body))
      return r.body.session_id as string
    }
  )

const input = [{ content: [{ type: "input_text", text: "{\"script\":[{\"text\":\"hi\"}]}" }] }]

const until = <A>(probe: Effect.Effect<A | undefined>) =>
  Effect.gen(function* () {
    while (true) {
      const a = yield* probe
      if (a !== undefined) return a
      yield* Effect.sleep("10 millis")
    }
  }).pipe(Effect.timeout("10 seconds"))

describe("Session initialization (dev Core, scripted Runtime)", () => {
  it.live("a begin refused resource_unavailable is retried; once every step completed the Turn is dispatched", () =>
    withCore((call, connect) =>
      Effect.gen(function* () {
        const peer = yield* connect("refuse_first_begin")
        const session = yield* createSession(call)
        const started = yield* call("POST", `/sessions/${session}/turns`, { input })
        assert.strictEqual(started.status, 202, JSON.stringify(started.body))
        yield* until(Effect.sync(() => (peer.seen.includes("execution_prepare") ? true : undefined)))
        assert.deepStrictEqual(peer.seen.slice(0, 7), [
          "begin:file", // refused: nothing started
          "begin:file",
          "chunk",
          "commit",
          "begin:initialize",
          "commit",
          "execution_prepare"
        ])
        const view = (yield* call("GET", `/sessions/${session}`)).body.initialization
        assert.deepStrictEqual([view.state, view.bytes_sent, view.bytes_total], ["completed", 5, 5])
        assert.deepStrictEqual(view.steps.map((s: any) => s.state), ["completed", "completed"])
      })))

  it.live("a commit cut off by the connection: initialization_unknown, the Turn never dispatched, nothing replayed", () =>
    withCore((call, connect) =>
      Effect.gen(function* () {
        const first = yield* connect("drop_at_commit")
        const session = yield* createSession(call)
        const started = yield* call("POST", `/sessions/${session}/turns`, { input })
        assert.strictEqual(started.status, 202)
        yield* Deferred.await(first.dropped)
        const turn = yield* until(Effect.map(call("GET", `/turns/${started.body.turn_id}`), (t) =>
          t.body.status === "queued" || t.body.status === "running" ? undefined : t.body))
        assert.deepStrictEqual([turn.status, turn.outcome.error_code, turn.outcome.detail], [
          "failed",
          "initialization_unknown",
          "file /workspace/a.txt: connection_lost"
        ])
        assert.strictEqual(turn.dispatched_at_ms, null)
        const view = (yield* call("GET", `/sessions/${session}`)).body.initialization
        assert.deepStrictEqual([view.state, view.steps[0].state, view.steps[1].state], ["unknown", "unknown", "pending"])
        // A new connection: a second Turn is refused, and nothing is sent again.
        const second = yield* connect("drop_at_commit")
        const again = yield* call("POST", `/sessions/${session}/turns`, { input })
        assert.deepStrictEqual([again.status, again.body.error], [409, "initialization_unknown"])
        assert.deepStrictEqual(second.seen, [])
        assert.deepStrictEqual(first.seen, ["begin:file", "chunk", "commit"])
      })))
})
