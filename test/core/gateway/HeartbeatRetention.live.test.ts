/**
 * Issue 18, idle devices: a heartbeat that only repeats the declaration must leave no object of its own alive
 * until the next one (15 s later such an object has been promoted to V8's old generation, whose marking was most
 * of an idle device's CPU). Checked with WeakRefs and a forced collection, so this file needs the real GC
 * (`--expose-gc`, turned on at run time) and real turns of the event loop (a WeakRef keeps its target until the
 * end of the job that made it): hence `.live`. Timers still run on TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import type { Declaration } from "../../../src/core/DeviceSession.js"
import * as DeclarationPersistence from "../../../src/core/dev/DeclarationPersistence.js"
import { Gateway } from "../../../src/core/Gateway.js"
import { Messages } from "../../../src/proto/index.js"
import { connectMemory, device, deviceId, heartbeat, kind } from "../../support/coreScriptedRuntime.js"
import { gatewayLayer, settle } from "./helpers.js"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** Ends the current job (so WeakRefs made in it may be cleared), then collects everything unreachable. */
const collectGarbage = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(
  Effect.andThen(Effect.sync(() => {
    gc()
    gc()
  }))
)

describe("heartbeat retention", () => {
  it.effect("a repeated heartbeat's declaration is kept by neither the session nor the gateway once its observers drop it", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      const seen: Array<WeakRef<Declaration>> = []
      yield* gateway.listen((event) => {
        if (event._tag === "Declared" && !event.changed) seen.push(new WeakRef(event.declaration))
      })
      const connection = yield* connectMemory(device("dev-1"))
      const text = (ts: number) =>
        Messages.encodeMessage(heartbeat([kind("codex")], { ts, activeRequests: 1, daemonVersion: "1.4.2" })).pipe(
          (r) => (r._tag === "Success" ? r.success : "")
        )
      yield* connection.runtime.sendRaw(text(100))
      for (const ts of [115, 130, 145]) yield* connection.runtime.sendRaw(text(ts))
      yield* settle(connection)
      assert.strictEqual(seen.length, 3)
      yield* collectGarbage
      assert.deepStrictEqual(seen.map((ref) => ref.deref() === undefined), [true, true, true])
      // The session still answers with the latest liveness facts.
      const latest = Option.getOrThrow(yield* connection.session.declaration)
      assert.deepStrictEqual([latest.ts, latest.activeRequests, latest.daemonVersion], [145, 1, "1.4.2"])
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("the declaration persistence keeps a repeated heartbeat's liveness facts, not its declaration", () =>
    Effect.gen(function*() {
      const tracker = DeclarationPersistence.makeTracker()
      const declared = (ts: number, changed: boolean): Declaration => {
        const declaration: Declaration = { kinds: new Map(), daemonVersion: "1.4.2", activeRequests: 2, ts, receivedAtMs: ts * 1000 }
        tracker.apply({ _tag: "Declared", deviceId: deviceId("dev-1"), connectionNumber: 1, declaration, changed })
        return declaration
      }
      declared(100, true)
      tracker.take()
      const refs = [115, 130].map((ts) => new WeakRef(declared(ts, false)))
      yield* collectGarbage
      assert.deepStrictEqual(refs.map((ref) => ref.deref() === undefined), [true, true])
      assert.deepStrictEqual(tracker.size(), { stored: 1, unstored: 1, pending: 0 })
      // The facts are written when the connection ends, as before.
      tracker.apply({ _tag: "Disconnected", deviceId: deviceId("dev-1"), connectionNumber: 1, reason: "disconnected", at: 0 })
      assert.deepStrictEqual(tracker.take(), [
        { _tag: "Liveness", deviceId: "dev-1", activeRequests: 2, heartbeatTs: 130, receivedAtMs: 130_000 }
      ])
    }))
})
