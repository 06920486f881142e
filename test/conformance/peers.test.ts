/**
 * The two scripted peers against each other over real loopback WebSockets: each replays the same scenario from
 * its own role (the scripted Core sends Core frames and checks the Runtime's, the scripted Runtime the
 * reverse), so the engine, the routes, the dialer and the barrier are exercised before any real side is
 * involved. Also: a divergent frame is reported at the right step with both values.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { heartbeat, prepare, SessionA, status, statusFrame } from "../../scenarios/Fixtures.js"
import {
  bind,
  connect,
  disconnect,
  frame,
  interleave,
  raw,
  reconnect,
  replace,
  runtime,
  scenario,
  type WireScenario
} from "../../scenarios/WireScenario.js"
import * as ScriptedCore from "../../src/conformance/ScriptedCore.js"
import * as ScriptedRuntime from "../../src/conformance/ScriptedRuntime.js"
import { type Hooks, replay } from "../../src/conformance/Replay.js"

const deviceId = "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"
const credential = Redacted.make("awdc_peer-test-credential")

const hooks: Hooks = {
  adjustClock: (d) => TestClock.adjust(d),
  live: TestClock.withLive,
  frameTimeout: Duration.seconds(5),
  mode: "in-process"
}

/** Replays `s` from both roles at once; returns [the verdict on the Runtime, the verdict on Core]. */
const both = (s: WireScenario) =>
  Effect.gen(function* () {
    const core = yield* ScriptedCore.make({ deviceId, credential })
    const runtimePeer = ScriptedRuntime.make({ coreUrl: core.coreUrl, deviceId, credential })
    return yield* Effect.all([
      replay(s, core.endpoint, hooks),
      replay(s, runtimePeer.endpoint, { ...hooks, drive: () => Effect.void })
    ], { concurrency: 2 })
  })

const plan = { runtime: { asserts: "peer test" }, core: { asserts: "peer test" } } as const

describe("scripted peers", () => {
  it.effect("replay a preparation with interleaved streams, a reconnection and a replacement from both roles", () =>
    Effect.gen(function* () {
      const s = scenario({
        name: "peer-basic",
        description: "peer self test",
        sections: [],
        replay: plan,
        steps: [
          connect(),
          heartbeat(),
          prepare("prep-1", SessionA),
          status("prep-1", 1, "preparing"),
          interleave([[statusFrame("prep-1", 2, "ready")], [frame({ type: "delta", id: "run-0", payload: { delta: "x", sequence: 1 } })]]),
          disconnect(),
          reconnect(),
          heartbeat(),
          replace(),
          heartbeat()
        ]
      })
      const [onRuntime, onCore] = yield* both(s)
      assert.deepStrictEqual(onRuntime, { _tag: "Pass", framesChecked: 6, skippedChecks: 0 })
      assert.deepStrictEqual(onCore, { _tag: "Pass", framesChecked: 1, skippedChecks: 0 })
    }))

  it.effect("answer 426 to a version mismatch and 401 to a revoked credential, before any frame", () =>
    Effect.gen(function* () {
      // The version rule needs each peer's own view: the scripted Core speaks 0.9.0, the scripted Runtime ours.
      const refused = { _tag: "Refused", at: "upgrade", status: 426, error: "incompatible_version" } as const
      const core = yield* ScriptedCore.make({ deviceId, credential })
      const runtimePeer = ScriptedRuntime.make({ coreUrl: core.coreUrl, deviceId, credential })
      const base = { name: "peer-426", description: "peer self test", sections: [], replay: plan } as const
      const verdicts = yield* Effect.all([
        replay(scenario({ ...base, steps: [connect({ peerVersion: "0.9.0", expect: refused })] }), core.endpoint, hooks),
        replay(scenario({ ...base, steps: [connect({ expect: refused })] }), runtimePeer.endpoint, hooks)
      ], { concurrency: 2 })
      assert.deepStrictEqual(verdicts.map((v) => v._tag), ["Pass", "Pass"])
      const credentials = scenario({
        name: "peer-401",
        description: "peer self test",
        sections: [],
        replay: plan,
        steps: [connect({ credential: "wrong", expect: { _tag: "Refused", at: "bootstrap", status: 401, error: "bad_credential" } })]
      })
      assert.deepStrictEqual((yield* both(credentials)).map((v) => v._tag), ["Pass", "Pass"])
    }))

  it.effect("report the first divergent frame with its step, path and both values", () =>
    Effect.gen(function* () {
      const core = yield* ScriptedCore.make({ deviceId, credential })
      const runtimePeer = ScriptedRuntime.make({ coreUrl: core.coreUrl, deviceId, credential })
      const expected = scenario({
        name: "peer-diverge",
        description: "peer self test",
        sections: [],
        replay: plan,
        steps: [
          connect(),
          runtime({ type: "preparation_status", id: "prep-1", payload: { handle: bind("h", "handle-1"), revision: 1, state: "preparing" } })
        ]
      })
      const sent = scenario({
        ...expected,
        steps: [connect(), raw("runtime", JSON.stringify({ type: "preparation_status", id: "prep-1", payload: { handle: "h-9", revision: 2, state: "preparing" } }))]
      })
      const [verdict] = yield* Effect.all([replay(expected, core.endpoint, hooks), replay(sent, runtimePeer.endpoint, hooks)], {
        concurrency: 2
      })
      assert.deepStrictEqual(verdict, {
        _tag: "Fail",
        divergence: {
          step: 2,
          stepKind: "Runtime",
          reason: "frame differs at payload.revision",
          expected: "1",
          actual: "2",
          frame: { type: "preparation_status", id: "prep-1" }
        }
      })
    }))

  it.effect("report a frame that fails the strict decoder without echoing it", () =>
    Effect.gen(function* () {
      const core = yield* ScriptedCore.make({ deviceId, credential })
      const runtimePeer = ScriptedRuntime.make({ coreUrl: core.coreUrl, deviceId, credential })
      const expected = scenario({ name: "peer-invalid", description: "peer self test", sections: [], replay: plan, steps: [connect(), heartbeat()] })
      const sent = scenario({
        ...expected,
        steps: [connect(), raw("runtime", JSON.stringify({ type: "heartbeat", payload: { ts: 1, active_requests: 0, secret: "do-not-echo" } }))]
      })
      const [verdict] = yield* Effect.all([replay(expected, core.endpoint, hooks), replay(sent, runtimePeer.endpoint, hooks)], {
        concurrency: 2
      })
      assert.strictEqual(verdict._tag, "Fail")
      const text = JSON.stringify(verdict)
      assert.include(text, "frame failed the strict decoder (invalid_payload)")
      assert.notInclude(text, "do-not-echo")
    }))

  it.effect("never see the credential in a URL, and refuse a missing bearer", () =>
    Effect.gen(function* () {
      const core = yield* ScriptedCore.make({ deviceId, credential })
      const res = yield* Effect.promise(() =>
        fetch(`${core.coreUrl}/agent-daemon/bootstrap`, { method: "POST", body: JSON.stringify({ device_id: deviceId }) })
      )
      assert.strictEqual(res.status, 401)
      assert.deepStrictEqual(yield* Effect.promise(() => res.json()), { error: "missing_bearer", detail: "" })
      const get = yield* Effect.promise(() => fetch(`${core.coreUrl}/agent-daemon/bootstrap`))
      assert.strictEqual(get.status, 405)
    }))
})
