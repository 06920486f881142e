/**
 * Test fixture for the Codex adapter: the fake Responses server, a temp daemon profile, the `codex` Harness
 * built from the pinned binary against the fake, and a recording Turn sink. Real processes and real time.
 */
import { Deferred, Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { Harness, PrepareRequest, TurnEvent, TurnSink } from "../../src/runtime/harness/Harness.js"
import { makeCodexHarness } from "../../src/runtime/harness/codex/CodexHarness.js"
import { processStat } from "../../src/runtime/harness/process/ProcessTable.js"
import { type FakeResponses, makeFakeResponses } from "./fakeResponses.js"

/** The provider key the tests hand to Codex through the environment; it must never leak. */
export const secretKey = "sk-agentwire-test-9f3c1d7e"
export const keyVar = "AW_TEST_CODEX_KEY"

export const providerConfig = (fake: FakeResponses) => [
  `model_providers.fake.name="fake"`,
  `model_providers.fake.base_url="${fake.baseUrl}"`,
  `model_providers.fake.env_key="${keyVar}"`,
  `model_providers.fake.wire_api="responses"`,
  `model_providers.fake.request_max_retries=0`,
  `model_providers.fake.stream_max_retries=0`,
  `model_provider="fake"`,
  `model="fake-model"`
]

export const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "aw-codex-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

export interface CodexFixture {
  readonly fake: FakeResponses
  readonly profile: string
  readonly harness: Harness
}

/** Every app-server pid the fixtures started (leak checks). */
export const spawnedCodexPids: Array<number> = []

export const codexFixture: Effect.Effect<CodexFixture, never, Scope.Scope> = Effect.gen(function* () {
  const fake = yield* makeFakeResponses
  const profile = yield* tempDir
  const harness = yield* makeCodexHarness({
    path: undefined,
    config: providerConfig(fake),
    env: { PATH: process.env["PATH"] ?? "", HOME: profile, [keyVar]: secretKey, AGENTWIRE_CREDENTIAL: "aw-secret-cred" },
    profileDir: profile,
    observeSpawn: (pid) => void spawnedCodexPids.push(pid)
  })
  return { fake, profile, harness }
})

/** The live members of process group `pgid` (the npm launcher and the native app-server it starts). */
export const groupMembers = (pgid: number): Array<number> =>
  Fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return []
    const stat = processStat(Number(entry))
    return stat !== undefined && stat.pgrp === pgid && stat.state !== "Z" ? [Number(entry)] : []
  })

let executors = 0
export const prepareRequest = (
  harness: Harness,
  config: Partial<PromptRequestPayload> = {},
  sessionId = "0b0e4c4e-5d0c-4a53-9a43-6c1d0f2f0001"
): PrepareRequest => ({
  executorId: unsafeMake.executorId(`executor-${++executors}`),
  sessionId: unsafeMake.sessionId(sessionId),
  configuration: {
    agent_kind: "codex",
    conversation_id: "",
    run_id: "",
    execution_controls: { web_search: "disabled", text_verbosity: "medium" },
    observe_messages: true,
    observe_tool_observations: true,
    ...config
  },
  declaration: harness.declaration
})

export interface Recorder {
  readonly sink: TurnSink
  readonly events: Array<TurnEvent>
  /** Waits for the first event (from now on or already seen) matching `predicate`. */
  readonly waitFor: <E extends TurnEvent>(predicate: (e: TurnEvent) => e is E) => Effect.Effect<E>
}

export const recorder = (): Recorder => {
  const events: Array<TurnEvent> = []
  const waiters: Array<{ readonly p: (e: TurnEvent) => boolean; readonly d: Deferred.Deferred<TurnEvent> }> = []
  return {
    events,
    sink: {
      emit: (event) =>
        Effect.sync(() => {
          events.push(event)
          for (const w of waiters) if (w.p(event)) Deferred.doneUnsafe(w.d, Effect.succeed(event))
        })
    },
    waitFor: <E extends TurnEvent>(predicate: (e: TurnEvent) => e is E) =>
      Effect.gen(function* () {
        const seen = events.find(predicate)
        if (seen !== undefined) return seen
        const d = yield* Deferred.make<TurnEvent>()
        waiters.push({ p: predicate, d })
        return (yield* Deferred.await(d)) as E
      })
  }
}

export const text = (t: string) => [{ content: [{ type: "input_text" as const, text: t }] }]

/** Pids of live processes whose environment holds `CODEX_HOME=<home>` prefix (Linux /proc). */
export const codexProcesses = (homePrefix: string): Array<number> => {
  const out: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const env = Fs.readFileSync(`/proc/${entry}/environ`, "utf8")
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      if (/\) Z /.test(stat)) continue
      if (env.split("\0").some((v) => v.startsWith(`CODEX_HOME=${homePrefix}`))) out.push(Number(entry))
    } catch {
      // gone or not ours
    }
  }
  return out
}

/** Files under `dir` whose bytes contain `needle`. */
export const filesContaining = (dir: string, needle: string): Array<string> => {
  const hits: Array<string> = []
  const walk = (d: string) => {
    for (const e of Fs.readdirSync(d, { withFileTypes: true })) {
      const p = Path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) {
        try {
          if (Fs.readFileSync(p).includes(needle)) hits.push(p)
        } catch {
          // removed meanwhile
        }
      }
    }
  }
  if (Fs.existsSync(dir)) walk(dir)
  return hits
}
