/**
 * Suspension fencing, Runtime side (issue #14; reference §8.1): quiesce accepted only when nothing is
 * unsettled, the drain before the reply, the close after it; the persisted suspend id fencing every later
 * connection (also across a process restart, through the profile file) until the matching resume arrives as the
 * first frame; `not_suspended`, repeat and `rollback` rules; the 30 s resume wait (TestClock, just before and at
 * it); a disk that refuses the write keeps admission open.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import type { Messages } from "../../src/proto/index.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import * as SuspensionStore from "../../src/runtime/SuspensionStore.js"
import {
  adjust,
  connect,
  next,
  prepareReady,
  processLayer,
  releaseFrame,
  same,
  script,
  settle,
  silent,
  startFrame
} from "../support/runtimeTestWire.js"
import { tempWorkspace } from "../support/workspaceDir.js"
import { fileBegin } from "../support/prepareFrames.js"
import { bytesRead } from "../support/workspaceFrames.js"

const quiesce = (id: string, env: string, suspendId: string, rollback?: boolean): Messages.CoreToRuntime => ({
  type: "environment_quiesce",
  id: unsafeMake.operationId(id),
  payload: { environment_id: env, suspend_id: unsafeMake.suspensionId(suspendId), ...(rollback === undefined ? {} : { rollback }) }
})
const resume = (id: string, env: string, suspendId: string, rollback?: boolean): Messages.CoreToRuntime => ({
  type: "environment_resume",
  id: unsafeMake.operationId(id),
  payload: { environment_id: env, suspend_id: unsafeMake.suspensionId(suspendId), ...(rollback === undefined ? {} : { rollback }) }
})
const reply = (env: string, suspendId: string, code?: string) =>
  code === undefined
    ? { environment_id: env, suspend_id: suspendId, accepted: true }
    : { environment_id: env, suspend_id: suspendId, accepted: false, error_code: code }

type Core = Effect.Success<ReturnType<typeof connect>>["core"]
const quiesced = (core: Core) => Effect.map(next(core, "environment_quiesced"), (f) => [f.id, f.payload] as const)
const resumed = (core: Core) => Effect.map(next(core, "environment_resumed"), (f) => [f.id, f.payload] as const)

/** Runs `body` on a daemon bound to a fresh temporary workspace, with the Environment id it is bound to. */
const onBoundDaemon = <A, E>(body: (env: string) => Effect.Effect<A, E, Effect.Services<ReturnType<typeof connect>>>) =>
  Effect.gen(function* () {
    const ws = yield* tempWorkspace
    return yield* body(ws.local.id).pipe(Effect.provide(processLayer({ environment: ws.binding })))
  })

describe("Suspension (Runtime)", () => {
  it.effect("quiesce on an idle daemon: accepted, then closed; every later connection is fenced until the matching resume", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const c1 = yield* connect()
        yield* c1.core.toRuntime(quiesce("q-1", env, "susp-1"))
        same(yield* quiesced(c1.core), ["q-1", reply(env, "susp-1")])
        same(yield* c1.core.closedByRuntime, { code: 1000, reason: "suspended" })
        yield* c1.core.close(1000)
        same((yield* Fiber.join(c1.fiber))._tag, "TransportEnded")

        // Connection 2: a first frame other than the resume is refused (nothing admitted) and closes.
        const c2 = yield* connect({ connectionNumber: 2 })
        yield* c2.core.toRuntime(prepareReadyFrame())
        same(yield* c2.core.closedByRuntime, { code: 1000, reason: "resume_required" })
        assert.isTrue(yield* silent(c2.core), "no preparation status while suspended")
        yield* c2.core.close(1000)
        yield* Fiber.join(c2.fiber)

        // Connection 3: a resume naming another suspend id is answered invalid_request and closes.
        const c3 = yield* connect({ connectionNumber: 3 })
        yield* c3.core.toRuntime(resume("r-0", env, "susp-other"))
        same(yield* resumed(c3.core), ["r-0", reply(env, "susp-other", "invalid_request")])
        same(yield* c3.core.closedByRuntime, { code: 1000, reason: "resume_mismatch" })
        yield* c3.core.close(1000)
        yield* Fiber.join(c3.fiber)

        // Connection 4: the matching resume first reopens admission.
        const c4 = yield* connect({ connectionNumber: 4 })
        yield* c4.core.toRuntime(resume("r-1", env, "susp-1"))
        same(yield* resumed(c4.core), ["r-1", reply(env, "susp-1")])
        const { ready } = yield* prepareReady(c4.core, "prep-1")
        same(ready.state, "ready")
        // Repeating the last accepted resume is accepted; another one is not_suspended.
        yield* c4.core.toRuntime(resume("r-2", env, "susp-1"))
        same(yield* resumed(c4.core), ["r-2", reply(env, "susp-1")])
        yield* c4.core.toRuntime(resume("r-3", env, "susp-2"))
        same(yield* resumed(c4.core), ["r-3", reply(env, "susp-2", "not_suspended")])
      })))

  it.effect("unsettled work refuses quiesce with resource_busy: an owned preparation, a running Run; admission stays open", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const { core } = yield* connect()
        yield* prepareReady(core, "prep-1")
        yield* core.toRuntime(quiesce("q-1", env, "susp-1"))
        same(yield* quiesced(core), ["q-1", reply(env, "susp-1", "resource_busy")])
        yield* core.toRuntime(startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ wait: "never" }])))
        yield* next(core, "preparation_status")
        yield* next(core, "preparation_status")
        yield* core.toRuntime(quiesce("q-2", env, "susp-2"))
        same(yield* quiesced(core), ["q-2", reply(env, "susp-2", "resource_busy")])
        // Nothing was fenced: a release of an unknown handle is still answered.
        yield* core.toRuntime(releaseFrame("rel-1", "handle-9"))
        same((yield* next(core, "preparation_status")).payload.state, "rejected")
      })))

  it.effect("an active runtime_prepare transfer refuses quiesce with resource_busy", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(fileBegin("t-1", env, "/workspace/a.txt", "hello"))
        same((yield* next(core, "runtime_prepare_result")).payload.outcome, "ready")
        yield* core.toRuntime(quiesce("q-1", env, "susp-1"))
        same(yield* quiesced(core), ["q-1", reply(env, "susp-1", "resource_busy")])
      })))

  it.effect("invalid_request: another Environment, rollback on quiesce, an unbound daemon, a malformed request", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const env = ws.local.id
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(quiesce("q-1", "another-env", "susp-1"))
        same(yield* quiesced(core), ["q-1", reply("another-env", "susp-1", "invalid_request")])
        yield* core.toRuntime(quiesce("q-2", env, "susp-1", true))
        same(yield* quiesced(core), ["q-2", reply(env, "susp-1", "invalid_request")])
        yield* core.toRuntime(resume("r-1", "another-env", "susp-1", true))
        same(yield* resumed(core), ["r-1", reply("another-env", "susp-1", "invalid_request")])
        yield* core.toRuntime(JSON.stringify({ type: "environment_quiesce", id: "q-bad", payload: { environment_id: env, suspend_id: "" } }))
        same(yield* quiesced(core), ["q-bad", reply("", "", "invalid_request")])
        yield* core.toRuntime(JSON.stringify({ type: "environment_resume", id: "r-bad", payload: { environment_id: env, suspend_id: "x".repeat(129) } }))
        same(yield* resumed(core), ["r-bad", reply("", "", "invalid_request")])
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(quiesce("q-3", env, "susp-1"))
        same(yield* quiesced(core), ["q-3", reply(env, "susp-1", "invalid_request")])
      }).pipe(Effect.provide(processLayer()))
    }))

  it.effect("resume on an unsuspended connection: not_suspended, unless rollback (a no-op resume of the running source)", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(resume("r-1", env, "susp-1"))
        same(yield* resumed(core), ["r-1", reply(env, "susp-1", "not_suspended")])
        yield* core.toRuntime(resume("r-2", env, "susp-1", true))
        same(yield* resumed(core), ["r-2", reply(env, "susp-1")])
        const { ready } = yield* prepareReady(core, "prep-1")
        same(ready.state, "ready")
      })))

  it.effect("the reply waits for the drain: a receipt send stuck for its 5 s budget delays it; frames meanwhile get nothing", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.holdWrites
        // A read of an unknown handle is refused at once: its receipt send waits in the background.
        yield* core.toRuntime(bytesRead("read-1", env, "a.txt", 10, { handle: "handle-9" }))
        yield* core.toRuntime(quiesce("q-1", env, "susp-1"))
        yield* core.toRuntime(prepareReadyFrame())
        // The receipt's send gives up at 5 s (the drain's bound too); only then is the reply sent, with its own
        // 5 s budget: the close comes at 10 s, not before.
        yield* adjust("5 seconds")
        yield* adjust("4999 millis")
        assert.isFalse(yield* closedYet(core))
        yield* adjust("1 millis")
        same(yield* core.closedByRuntime, { code: 1000, reason: "suspended" })
        yield* core.releaseWrites
        yield* settle
        const sent = (yield* core.sent).map((f) => f.type)
        assert.notInclude(sent, "preparation_status", "nothing for the preparation sent during the drain")
      })))

  it.effect("a suspended connection waits 30 s for the resume (not 1 ms less), then closes; the next attempt is fenced again", () =>
    onBoundDaemon((env) =>
      Effect.gen(function* () {
        const c1 = yield* connect()
        yield* c1.core.toRuntime(quiesce("q-1", env, "susp-1"))
        yield* quiesced(c1.core)
        yield* c1.core.close(1000)
        yield* Fiber.join(c1.fiber)

        const c2 = yield* connect({ connectionNumber: 2 })
        yield* adjust("29999 millis")
        assert.isFalse(yield* closedYet(c2.core))
        yield* adjust("1 millis")
        same(yield* c2.core.closedByRuntime, { code: 1000, reason: "resume_timeout" })
        yield* c2.core.close(1000)
        yield* Fiber.join(c2.fiber)

        const c3 = yield* connect({ connectionNumber: 3 })
        yield* c3.core.toRuntime(resume("r-1", env, "susp-1", true))
        same(yield* resumed(c3.core), ["r-1", reply(env, "susp-1")])
      })))

  it.effect("the suspend id survives a process restart through the profile file (0600); the resume clears it", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const env = ws.local.id
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-profile-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
      const file = Path.join(dir, "suspension.json")
      const processWith = Effect.map(SuspensionStore.load(file), (initial) =>
        processLayer({ environment: ws.binding, suspension: { file, initial } }))

      yield* Effect.gen(function* () {
        const c = yield* connect()
        yield* c.core.toRuntime(quiesce("q-1", env, "susp-7"))
        same(yield* quiesced(c.core), ["q-1", reply(env, "susp-7")])
      }).pipe(Effect.provide(yield* processWith))
      same(Fs.statSync(file).mode & 0o777, 0o600)
      same(JSON.parse(Fs.readFileSync(file, "utf8")).suspended, { environment_id: env, suspend_id: "susp-7" })

      // A new process: fenced from the first connection on.
      yield* Effect.gen(function* () {
        const c = yield* connect()
        yield* c.core.toRuntime(prepareReadyFrame())
        same(yield* c.core.closedByRuntime, { code: 1000, reason: "resume_required" })
      }).pipe(Effect.provide(yield* processWith))
      yield* Effect.gen(function* () {
        const c = yield* connect()
        yield* c.core.toRuntime(resume("r-1", env, "susp-7"))
        same(yield* resumed(c.core), ["r-1", reply(env, "susp-7")])
      }).pipe(Effect.provide(yield* processWith))
      same(yield* SuspensionStore.load(file), { version: 1, suspended: null, last_resume: { environment_id: env, suspend_id: "susp-7" } })

      Fs.writeFileSync(file, "{not json")
      const failed = yield* Effect.flip(SuspensionStore.load(file))
      same(failed.operation, "decode")
      assert.notInclude(failed.message, "not json")
    }))

  it.effect("a disk that refuses the write: quiesce answers resource_busy and admission stays open", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const env = ws.local.id
      const refusing = SuspensionStore.SuspensionStore.layer({
        file: "/nonexistent/suspension.json",
        write: (path) => Effect.fail(new SuspensionStore.SuspensionStateFailed({ path, operation: "write" }))
      })
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(quiesce("q-1", env, "susp-1"))
        same(yield* quiesced(core), ["q-1", reply(env, "susp-1", "resource_busy")])
        const { ready } = yield* prepareReady(core, "prep-1")
        same(ready.state, "ready")
      }).pipe(Effect.provide(processLayer({ environment: ws.binding, suspensionStore: Layer.fresh(refusing) })))
    }))
})

/** Whether the Runtime already closed the connection (without waiting). */
const closedYet = (core: Core) =>
  Effect.map(Effect.raceFirst(Effect.as(core.closedByRuntime, true), Effect.as(settle, false)), (b) => b)

const prepareReadyFrame = (): Messages.CoreToRuntime => ({
  type: "execution_prepare",
  id: unsafeMake.preparationRequestId("prep-fenced"),
  payload: {
    session_id: unsafeMake.sessionId("b0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a69"),
    configuration: {
      agent_kind: "scripted",
      conversation_id: "",
      run_id: "",
      agent_state_key: "agents-api-b0a4c7e2-6d1f-4a53-9a7e-1f2d3c4b5a69",
      release_on_completion: true,
      strict_resume: true,
      disable_execution_environment: true
    }
  }
})
