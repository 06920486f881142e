/**
 * The shared Harness lifecycle suite (issue #15; reference harnesses.md §1.7, "shared text assertions"). Every
 * adapter runs it through a fixture: the scripted adapter (a controlled transport: proves the contract shape,
 * never native behaviour) and each real adapter (Claude Code, Codex) against its real binary and a fake model
 * server. It drives the adapter contract directly (`Harness.prepare` in a Scope, `Executor.startTurn`, the
 * `Turn` operations, `Executor.close`), never the wire.
 *
 * A scenario whose capability the fixture's declaration marks unsupported is not run; instead the suite asserts
 * that the declaration really says `false` (so skipping can never hide a declared-but-broken capability).
 *
 * Fixture interface (scripted, claude_code and codex implement it):
 * - `harness`: the kind's constructor (discovery included), run once per test in the test's Scope.
 * - `configuration`: the frozen Session configuration of a preparation (resume options layered on top).
 * - `inputs`: one MessageInput per scenario, interpreted by the adapter's native side (a script for the
 *   scripted adapter, keywords for the fake model server).
 * - `nativePids`: the process ids an Executor owns (empty for an adapter without processes), for the
 *   "no orphan left" checks.
 * - `spawnedPids`: every native process id the fixture's adapter started so far (for the interrupted
 *   preparation check).
 * - `live`: run on the live clock (real processes) instead of the TestClock.
 * - `history`: for a real fixture, the fake model server's last request, so resume and function results are
 *   proven to reach the model (not only the adapter).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Option, Queue, Scope } from "effect"
import type { CapabilityName } from "../../src/proto/Capabilities.js"
import type { EngineFailureCode } from "../../src/proto/ErrorCodes.js"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import type {
  Executor,
  HarnessDeclaration,
  PrepareFailed,
  PrepareRequest,
  Settlement,
  Turn,
  TurnEvent
} from "../../src/runtime/harness/Harness.js"
import { settledDone } from "../../src/runtime/harness/Harness.js"
import { isRunning } from "../support/processAlive.js"
import { withPreparationServices } from "../support/preparationServices.js"
import type { Ownership } from "../../src/runtime/Ownership.js"
import type { RuntimePolicy } from "../../src/runtime/RuntimePolicy.js"

/**
 * The adapter contract as the suite uses it: preparation runs in a Scope (the Runtime's Executor child scope),
 * which an adapter that predates the scoped contract simply does not need.
 */
export interface Harness {
  readonly declaration: HarnessDeclaration
  readonly prepare: (
    request: PrepareRequest
  ) => Effect.Effect<Executor, PrepareFailed, Scope.Scope | Ownership | RuntimePolicy>
}

export interface LifecycleInputs {
  /** Completes with text output and a usage measurement. */
  readonly text: MessageInput
  /** Ends with an engine error (then done). */
  readonly error: MessageInput
  /** Streams output slowly: stays active long enough to steer or cancel it. */
  readonly slow: MessageInput
  /** Active input for the slow Turn. */
  readonly steer: MessageInput
  /** Asks for permission to run a tool. */
  readonly permission: MessageInput
  /** Asks the user one question with at least one option. */
  readonly userChoice: MessageInput
  /** Calls the function tool named in `functionConfiguration`. */
  readonly functionCall: MessageInput
  /** A text Turn whose words a resumed session must carry in its next model request (`recallMarker`). */
  readonly recall: MessageInput
}

export interface LifecycleFixture {
  readonly name: string
  /** "controlled" proves the transport contract only; "real" proves native behaviour. */
  readonly nature: "controlled" | "real"
  readonly live: boolean
  /** Per-test timeout in milliseconds (real binaries are slow). */
  readonly timeout: number
  readonly harness: Effect.Effect<Harness, never, Scope.Scope>
  /**
   * The last request the fake model server received, as text, and the word of `inputs.recall` it must contain
   * after a resume (native history restored). Required for a real fixture; a controlled one has no model.
   */
  readonly history?: { readonly lastModelRequest: Effect.Effect<string>; readonly recallMarker: string } | undefined
  readonly configuration: (overrides?: Partial<PromptRequestPayload>) => PromptRequestPayload
  /** Extra configuration that declares the function tool `functionCall` calls. */
  readonly functionConfiguration: Partial<PromptRequestPayload>
  readonly inputs: LifecycleInputs
  /** The classified code of the `error` input's engine error. */
  readonly errorCode: EngineFailureCode | undefined
  readonly nativePids: (executor: Executor) => ReadonlyArray<number>
  readonly spawnedPids: Effect.Effect<ReadonlyArray<number>>
  /** A native session id the adapter certainly does not know. */
  readonly unknownSession: string
  /**
   * Scenarios the fixture cannot exercise although the capability is declared, with the reason (controlled
   * adapters only; a real fixture must leave this empty).
   */
  readonly notExercised?: Partial<Record<ScenarioName, string>>
}

export type ScenarioName =
  | "text"
  | "usage"
  | "error"
  | "cancel"
  | "steer"
  | "permission_allow"
  | "permission_deny"
  | "user_choice"
  | "function_call"
  | "resume"
  | "unknown_session"
  | "close"
  | "interrupted_preparation"

/** The capability each scenario needs from the declaration. */
const scenarioCapability: Record<ScenarioName, CapabilityName | undefined> = {
  text: "streaming",
  usage: "usage",
  error: undefined,
  cancel: "durable_turns",
  steer: "durable_input_receipts",
  permission_allow: "permissions",
  permission_deny: "permissions",
  user_choice: "permissions",
  function_call: "function_tools",
  resume: "resume",
  unknown_session: "resume",
  close: undefined,
  interrupted_preparation: "preparation"
}

// ---------------------------------------------------------------------------------------------- helpers

let runCounter = 0
const nextRunId = () => unsafeMake.runId(`run-lifecycle-${++runCounter}`)
let executorCounter = 0
const nextExecutorId = () => unsafeMake.executorId(`exec-lifecycle-${++executorCounter}`)

/** A started Turn with its event queue. */
export interface Started {
  readonly turn: Turn
  readonly events: Queue.Queue<TurnEvent>
  readonly seen: Array<TurnEvent>
}

let sessionCounter = 0
/** A fresh Core Session id (canonical UUID shape); every preparation of one test uses the same Session. */
const nextSessionId = () => unsafeMake.sessionId(`00000000-0000-4000-8000-${String(++sessionCounter).padStart(12, "0")}`)
let currentSession = nextSessionId()

export const prepare = (harness: Harness, configuration: PromptRequestPayload) =>
  withPreparationServices(harness.prepare({ executorId: nextExecutorId(), sessionId: currentSession, configuration, declaration: harness.declaration }))

export const start = (executor: Executor, input: MessageInput) =>
  Effect.gen(function* () {
    const events = yield* Queue.unbounded<TurnEvent>()
    const seen: Array<TurnEvent> = []
    const turn = yield* executor.startTurn(nextRunId(), input, {
      emit: (event) => Effect.andThen(Effect.sync(() => seen.push(event)), Queue.offer(events, event))
    })
    return { turn, events, seen } satisfies Started
  })

/** Takes events until one matches; returns it. */
export const nextMatching = <T extends TurnEvent["type"]>(started: Started, type: T) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(started.events)
      if (event.type === type) return event as Extract<TurnEvent, { type: T }>
    }
  })

const text = (s: Started) => s.seen.flatMap((e) => (e.type === "delta" ? [e.delta] : [])).join("")

const settle = (s: Started): Effect.Effect<Settlement> => Effect.orDie(s.turn.awaitSettlement)

// ---------------------------------------------------------------------------------------------- suite

export const runLifecycleSuite = (fixture: LifecycleFixture) => {
  const test = (name: ScenarioName, sentence: string, body: (harness: Harness) => Effect.Effect<void, unknown, Scope.Scope>) => {
    const run = fixture.live ? it.live : it.effect
    run(
      `${sentence} [${name}]`,
      () =>
        Effect.gen(function* () {
          currentSession = nextSessionId()
          const harness = yield* fixture.harness
          const capability = scenarioCapability[name]
          if (capability !== undefined && !harness.declaration.capabilities[capability]) {
            // Not declared: nothing to prove natively; the declaration itself is the evidence.
            assert.isFalse(harness.declaration.capabilities[capability])
            return
          }
          if (fixture.notExercised?.[name] !== undefined) {
            assert.strictEqual(fixture.nature, "controlled", "a real fixture exercises every declared scenario")
            return
          }
          yield* body(harness)
        }),
      fixture.timeout
    )
  }

  const prepared = (harness: Harness, overrides?: Partial<PromptRequestPayload>) =>
    Effect.orDie(prepare(harness, fixture.configuration(overrides)))

  describe(`Harness lifecycle: ${fixture.name} (${fixture.nature})`, () => {
    test("text", "a text Turn streams its output and completes with the native session id", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const started = yield* start(executor, fixture.inputs.text)
        const settlement = yield* settle(started)
        assert.strictEqual(settlement.outcome, "completed")
        assert.isTrue(settlement.reusable)
        assert.isTrue(started.seen.some((e) => e.type === "delta"))
        assert.isFalse(started.seen.some((e) => e.type === "error"))
        assert.strictEqual(settledDone(settlement).content, text(started))
        assert.isTrue(settledDone(settlement).content.length > 0)
        const session = settlement.done.metadata?.agent_session_id
        assert.isString(session)
        assert.deepStrictEqual(yield* executor.nativeSessionId, Option.some(session!))
        // A second Turn on the same Executor is a new Turn on the same native session.
        const second = yield* start(executor, fixture.inputs.text)
        const again = yield* settle(second)
        assert.strictEqual(again.outcome, "completed")
        assert.strictEqual(again.done.metadata?.agent_session_id, session)
      }))

    test("usage", "usage is a per-Run snapshot: the same Turn twice measures the same, never a running total", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const first = yield* settle(yield* start(executor, fixture.inputs.text))
        const secondStarted = yield* start(executor, fixture.inputs.text)
        const second = yield* settle(secondStarted)
        assert.isDefined(first.done.usage)
        assert.deepStrictEqual(second.done.usage, first.done.usage)
        const frames = secondStarted.seen.flatMap((e) => (e.type === "usage" ? [e.payload] : []))
        assert.isTrue(frames.length > 0)
        assert.deepStrictEqual(frames[frames.length - 1], second.done.usage)
      }))

    test("error", "an engine error is reported with its classified code, then the Turn completes (done follows)", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const started = yield* start(executor, fixture.inputs.error)
        const settlement = yield* settle(started)
        const errors = started.seen.flatMap((e) => (e.type === "error" ? [e.payload] : []))
        assert.strictEqual(errors.length, 1)
        assert.strictEqual(errors[0]!.code, fixture.errorCode)
        assert.strictEqual(settlement.outcome, "completed")
        assert.isString(settlement.done.metadata?.agent_session_id)
      }))

    test("cancel", "cancelling mid-stream settles as cancelled with the continuity snapshot, and the Executor stays usable", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const started = yield* start(executor, fixture.inputs.slow)
        yield* nextMatching(started, "delta")
        yield* Effect.orDie(started.turn.cancel)
        const settlement = yield* settle(started)
        assert.strictEqual(settlement.outcome, "cancelled")
        assert.isTrue(settlement.reusable)
        assert.isString(settlement.done.metadata?.agent_session_id)
        assert.isTrue(settledDone(settlement).content.length > 0, "partial output stays in the snapshot")
        // Cancelling the settled Turn again has no effect; the next Turn completes normally.
        yield* Effect.orDie(started.turn.cancel)
        const next = yield* settle(yield* start(executor, fixture.inputs.text))
        assert.strictEqual(next.outcome, "completed")
        assert.strictEqual(next.done.metadata?.agent_session_id, settlement.done.metadata?.agent_session_id)
      }))

    test("steer", "active input reports written exactly once, then accepted, and the Turn completes after consuming it", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const started = yield* start(executor, fixture.inputs.slow)
        yield* nextMatching(started, "delta")
        let written = 0
        const writtenDone = yield* Deferred.make<void>()
        yield* Effect.orDie(started.turn.steerWithReceipt(
          { inputId: unsafeMake.inputId("input-1"), input: fixture.inputs.steer, durable: true },
          Effect.andThen(Effect.sync(() => written++), Deferred.succeed(writtenDone, undefined))
        ))
        assert.strictEqual(written, 1)
        const settlement = yield* settle(started)
        assert.strictEqual(settlement.outcome, "completed")
        assert.isFalse(started.seen.some((e) => e.type === "error"))
      }))

    const permission = (approved: boolean) =>
      (harness: Harness) =>
        Effect.gen(function* () {
          const executor = yield* prepared(harness)
          const started = yield* start(executor, fixture.inputs.permission)
          const request = yield* nextMatching(started, "permission_request")
          yield* Effect.orDie(started.turn.decidePermission(request.payload.request_id, {
            approved,
            ...(approved ? {} : { message: "denied by the lifecycle suite" })
          }))
          const settlement = yield* settle(started)
          assert.strictEqual(settlement.outcome, "completed")
          // A decided request is no longer pending.
          const again = yield* Effect.exit(started.turn.decidePermission(request.payload.request_id, { approved }))
          assert.isTrue(Exit.isFailure(again))
        })
    test("permission_allow", "a permission request allowed by Core lets the tool run", permission(true))
    test("permission_deny", "a permission request denied by Core stops the tool and the Turn still completes", permission(false))

    test("user_choice", "a user choice is asked with stable question ids and the answer is applied", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        const started = yield* start(executor, fixture.inputs.userChoice)
        const ask = yield* nextMatching(started, "prompt_for_user_choice")
        const question = ask.payload.questions[0]!
        assert.isTrue(question.id.length > 0)
        yield* Effect.orDie(started.turn.answerUserChoice(ask.payload.ask_id, {
          cancelled: false,
          questionAnswers: [{ question_id: question.id, answers: [question.options[0]!.label] }]
        }))
        const settlement = yield* settle(started)
        assert.strictEqual(settlement.outcome, "completed")
      }))

    test("function_call", "a function call round trip delivers the result under the native call id", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness, fixture.functionConfiguration)
        const started = yield* start(executor, fixture.inputs.functionCall)
        const call = yield* nextMatching(started, "function_call")
        yield* Effect.orDie(started.turn.submitFunctionResult({
          callId: call.payload.call_id,
          success: true,
          content: [{ type: "input_text", text: "forty-two" }]
        }))
        const settlement = yield* settle(started)
        assert.strictEqual(settlement.outcome, "completed")
        // The result reached the model under the native call id (the follow-up request carries it).
        if (fixture.history !== undefined) assert.include(yield* fixture.history.lastModelRequest, "forty-two")
      }))

    test("resume", "a new Executor resumes a prior native session strictly and keeps its identity", (harness) =>
      Effect.gen(function* () {
        const first = yield* prepared(harness)
        const before = yield* settle(yield* start(first, fixture.inputs.recall))
        const session = before.done.metadata?.agent_session_id
        assert.isString(session)
        yield* Effect.orDie(first.close)
        const resumed = yield* prepared(harness, {
          agent_session_id: session!,
          strict_resume: true,
          require_existing_native_session: true
        })
        assert.deepStrictEqual(yield* resumed.nativeSessionId, Option.some(session!))
        const after = yield* settle(yield* start(resumed, fixture.inputs.text))
        assert.strictEqual(after.outcome, "completed")
        assert.strictEqual(after.done.metadata?.agent_session_id, session)
        // The new process restored the native history: the model sees the first Turn's words again.
        if (fixture.nature === "real") assert.isDefined(fixture.history, "a real fixture proves history")
        if (fixture.history !== undefined) {
          assert.include(yield* fixture.history.lastModelRequest, fixture.history.recallMarker)
        }
      }))

    test("unknown_session", "an unknown native session fails preparation with history_unavailable before any input", (harness) =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(prepare(harness, fixture.configuration({
          agent_session_id: fixture.unknownSession,
          strict_resume: true,
          require_existing_native_session: true
        })))
        assert.isTrue(Exit.isFailure(exit))
        const failure = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(failure))
        assert.strictEqual((Option.getOrThrow(failure) as PrepareFailed).code, "history_unavailable")
      }))

    test("close", "close stops every native process (no orphan left, checked by pid) and is idempotent", (harness) =>
      Effect.gen(function* () {
        const executor = yield* prepared(harness)
        yield* settle(yield* start(executor, fixture.inputs.text))
        const pids = fixture.nativePids(executor)
        for (const pid of pids) assert.isTrue(isRunning(pid), `pid ${pid} alive before close`)
        yield* Effect.orDie(executor.close)
        for (const pid of pids) assert.isFalse(isRunning(pid), `pid ${pid} gone after close`)
        yield* Effect.orDie(executor.close)
        const exit = yield* Effect.exit(executor.startTurn(nextRunId(), fixture.inputs.text, { emit: () => Effect.void }))
        assert.isTrue(Exit.isFailure(exit), "a closed Executor starts no Turn")
      }))

    test("interrupted_preparation", "an interrupted preparation leaks no native process", (harness) =>
      Effect.gen(function* () {
        const before = new Set(yield* fixture.spawnedPids)
        const scope = yield* Scope.make()
        const fiber = yield* prepare(harness, fixture.configuration()).pipe(Scope.provide(scope), Effect.forkChild)
        // Interrupt as soon as a process exists (or at once for an adapter without processes).
        if (fixture.live) {
          for (let i = 0; i < 500; i++) {
            const now = yield* fixture.spawnedPids
            if (now.some((pid) => !before.has(pid))) break
            yield* Effect.sleep("5 millis")
          }
        }
        yield* Fiber.interrupt(fiber)
        yield* Scope.close(scope, Exit.void)
        const spawned = (yield* fixture.spawnedPids).filter((pid) => !before.has(pid))
        if (fixture.nature === "real") assert.isTrue(spawned.length > 0, "the preparation was interrupted after a spawn")
        for (const pid of spawned) assert.isFalse(isRunning(pid), `pid ${pid} gone after the interrupted preparation`)
      }))
  })
}
