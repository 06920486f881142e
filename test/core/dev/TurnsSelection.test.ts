/**
 * Device selection for Turns of Sessions without a bound device (issue 18): the gateway's kind index gives
 * the devices advertising the Session's kind, walked until one admits; the other devices are only counted.
 * Behaviour is the one of the full walk (which device, which refusal); at scale the number of devices whose
 * declaration is read stays at what the answer needs, not the number of connected devices.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import * as TurnJournal from "../../../src/core/dev/TurnJournal.js"
import * as Turns from "../../../src/core/dev/Turns.js"
import type { DeviceSession } from "../../../src/core/DeviceSession.js"
import { Gateway } from "../../../src/core/Gateway.js"
import { GatewayConfig } from "../../../src/core/GatewayConfig.js"
import { CapabilitiesUndeclared, HarnessUnavailable } from "../../../src/core/Outcome.js"
import { MessageInput } from "../../../src/proto/index.js"
import { yieldTimes } from "../../support/coreFakeSession.js"
import { connectMemory, device, heartbeat, kind } from "../../support/coreScriptedRuntime.js"

/** The devices whose declaration was read through the gateway (the devices a start examined). */
class Examined extends Context.Service<Examined, Set<string>>()("test/core/dev/Examined") {
  static readonly layer = Layer.sync(Examined, () => new Set<string>())
}

const counted = (examined: Set<string>, session: DeviceSession): DeviceSession => ({
  ...session,
  declaration: Effect.suspend(() => {
    examined.add(session.deviceId)
    return session.declaration
  })
})

/** The real gateway, with every session it hands out counting its declaration reads. */
const countingGateway = Layer.effect(
  Gateway,
  Effect.gen(function* () {
    const real = yield* Gateway
    const examined = yield* Examined
    return Gateway.of({
      ...real,
      session: (id) => Effect.map(real.session(id), Option.map((s) => counted(examined, s))),
      sessions: Effect.map(real.sessions, (all) => all.map((s) => counted(examined, s))),
      advertising: (k) =>
        Effect.map(real.advertising(k), (sessions) => ({
          *[Symbol.iterator]() {
            for (const s of sessions) yield counted(examined, s)
          }
        }))
    })
  })
).pipe(Layer.provide(Gateway.layer))

// The in-thread store: like Turns.test.ts, these tests settle with `flush` (fiber yields), which cannot wait for
// replies from the worker thread of the default store.
const store = Store.layerFile(":memory:", undefined, "in-thread").pipe(Layer.provideMerge(DevIds.layerTest))
const services = Turns.layer({ retryDelay: "1 second", shutdownGrace: "1 second" }).pipe(
  Layer.provideMerge(TurnJournal.layer),
  Layer.provideMerge(countingGateway),
  Layer.provideMerge(Examined.layer),
  Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test" })),
  Layer.provideMerge(store)
)

const flush = yieldTimes(300)

const session = (sessionId: string, agentKind: string) =>
  Effect.gen(function* () {
    yield* (yield* SessionStore).create({ sessionId, agentKind, environmentType: "none", configuration: {}, deviceId: undefined })
  })

/** Registers and connects `id`, then sends a heartbeat declaring `kinds` (none: no heartbeat, capabilities unknown). */
const connect = (id: string, kinds?: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* (yield* DeviceStore).issueCredential(id)
    const connection = yield* connectMemory(device(id))
    if (kinds !== undefined) yield* connection.runtime.send(heartbeat(kinds.map((k) => kind(k))))
    return connection
  })

const startOn = (sessionId: string) =>
  Effect.gen(function* () {
    const turns = yield* Turns.Turns
    const examined = yield* Examined
    examined.clear()
    const started = yield* Effect.result(turns.start(sessionId, MessageInput.text("hello")))
    return { started, examined: examined.size }
  })

describe("Turns device selection (unbound Sessions)", () => {
  it.effect("picks the device advertising the kind, and refuses as the full walk did", () =>
    Effect.gen(function* () {
      yield* connect("undeclared")
      yield* connect("codex-1", ["codex"])
      yield* connect("scripted-1", ["scripted"])
      yield* flush
      yield* session("s-scripted", "scripted")
      yield* session("s-codex", "codex")
      yield* session("s-other", "other")

      const scripted = yield* startOn("s-scripted")
      assert.strictEqual(scripted.started._tag === "Success" ? scripted.started.success.device_id : String(scripted.started.failure), "scripted-1")
      const codex = yield* startOn("s-codex")
      assert.strictEqual(codex.started._tag === "Success" ? codex.started.success.device_id : "refused", "codex-1")
      // No device advertises "other": a declared device refuses not_advertised, which beats undeclared.
      const other = yield* startOn("s-other")
      assert.deepStrictEqual(other.started._tag === "Failure" ? other.started.failure : undefined, new HarnessUnavailable({ kind: "other", reason: "not_advertised" }))
      assert.strictEqual(other.examined, 0)
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("refuses capabilities_undeclared when only devices without a heartbeat are connected", () =>
    Effect.gen(function* () {
      yield* connect("undeclared-1")
      yield* connect("undeclared-2")
      yield* flush
      yield* session("s1", "scripted")
      const { started } = yield* startOn("s1")
      assert.deepStrictEqual(started._tag === "Failure" ? started.failure : undefined, new CapabilitiesUndeclared({ kind: "scripted" }))
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a device that stops advertising the kind, or is replaced, leaves the index", () =>
    Effect.gen(function* () {
      const first = yield* connect("dev-1", ["scripted"])
      yield* flush
      yield* first.runtime.send(heartbeat([kind("codex")]))
      yield* flush
      yield* session("s1", "scripted")
      const gone = yield* startOn("s1")
      assert.deepStrictEqual(gone.started._tag === "Failure" ? gone.started.failure : undefined, new HarnessUnavailable({ kind: "scripted", reason: "not_advertised" }))
      assert.strictEqual(gone.examined, 0)
      // The same device reconnects (the old connection is replaced) and advertises scripted again.
      yield* connect("dev-1", ["scripted"])
      yield* flush
      const back = yield* startOn("s1")
      assert.strictEqual(back.started._tag === "Success" ? back.started.success.device_id : String(back.started.failure), "dev-1")
      assert.strictEqual(back.examined, 1)
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("at 1,000 connected devices a start examines the one device that admits it, not every device", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 999; i++) yield* connect(`codex-${i}`, ["codex"])
      yield* connect("scripted-1", ["scripted"])
      yield* flush
      yield* session("s-scripted", "scripted")
      yield* session("s-codex", "codex")
      const scripted = yield* startOn("s-scripted")
      assert.strictEqual(scripted.started._tag === "Success" ? scripted.started.success.device_id : String(scripted.started.failure), "scripted-1")
      assert.strictEqual(scripted.examined, 1)
      const codex = yield* startOn("s-codex")
      assert.isTrue(codex.started._tag === "Success")
      assert.strictEqual(codex.examined, 1)
    }).pipe(Effect.scoped, Effect.provide(services)), 120_000)
})
