/**
 * The invariants (issue #21), checked against what crossed the in-memory link, what Core stored and what the
 * native ledger saw. `Checker.frame` runs on every frame as it crosses; `Checker.store` after every step and at
 * quiescence. A violation is a one-line description; the simulator stops the schedule at the first step that
 * produced one.
 */
import { Effect, Option, Result } from "effect"
import type { TurnStore } from "../../src/core/dev/TurnStore.js"
import { Messages } from "../../src/proto/index.js"
import type { FrameEvent } from "./MemoryLink.js"
import type { WorkspaceLedger } from "./MemoryWorkspace.js"
import { activeCount, type NativeLedger, nativeExecutor } from "./NativeLedger.js"
import * as WorkspaceInvariants from "./WorkspaceInvariants.js"

export interface Secrets {
  /** Strings that must never appear in a frame, a log line or an error. */
  readonly everywhere: ReadonlyArray<string>
  /** Strings allowed only inside `execution_prepare` / `prompt_request` frames (agent_options), nowhere else. */
  readonly framesOnly: ReadonlyArray<string>
}

/** Canonical JSON (sorted keys), so a re-encoded frame compares equal to the one that crossed. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
  }
  return JSON.stringify(value)
}

const withoutTrace = (frame: Record<string, unknown>): Record<string, unknown> => {
  const { trace: _trace, ...rest } = frame
  return rest
}

const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

/** The invariant families of issue #21; every check performed is counted under one (a family never checked proves nothing). */
export type Family = "no_invented_terminal" | "no_replay" | "ownership" | "receipts" | "secrets" | "liveness" | "codec" | "workspace"

export const families: ReadonlyArray<Family> = [
  "no_invented_terminal",
  "no_replay",
  "ownership",
  "receipts",
  "secrets",
  "liveness",
  "codec",
  "workspace"
]

export interface Checker {
  readonly violations: Array<string>
  readonly checks: () => number
  /** Checks performed per invariant family. */
  readonly checksBy: () => Readonly<Record<Family, number>>
  /** Counts `n` checks of `family` (the simulator's own liveness and ownership checks). */
  readonly counted: (family: Family, n?: number) => void
  readonly frame: (event: FrameEvent, proc: number) => void
  readonly logLine: (line: string) => void
  readonly errorText: (text: string) => void
  /** Records that the operator asked to cancel this Turn (a cancelled status needs it). */
  readonly cancelAsked: (turnId: string) => void
  readonly store: (turns: ReadonlyArray<string>, turnStore: TurnStore["Service"]) => Effect.Effect<void>
  readonly capacity: (proc: number, maxActive: number) => void
  /** Writes, transfers, installs and reservations (WorkspaceInvariants.ts). */
  readonly workspace: WorkspaceInvariants.WorkspaceChecker
}

export const make = (ledger: NativeLedger, secrets: Secrets, ws: WorkspaceLedger, exercise: (key: string) => void): Checker => {
  const violations: Array<string> = []
  const byFamily = Object.fromEntries(families.map((f) => [f, 0])) as Record<Family, number>
  const tick = (family: Family, n = 1) => {
    byFamily[family] += n
  }
  const fail = (text: string) => {
    if (violations.length < 20) violations.push(text)
  }
  /** Canonical texts of the frames delivered to Core (with multiplicity). */
  const deliveredFrames = new Map<string, number>()
  /** Runs whose `done` reached Core. */
  const doneDelivered = new Set<string>()
  /**
   * `run|input_id` of steers sent → the connection it was last sent on, and whether the Runtime's receipt since
   * was a definite `not_ready` refusal (nothing written: Core may send the same input again on that connection).
   */
  const steersSent = new Map<string, { connection: number; refusedNotReady: boolean }>()
  const steersDelivered = new Set<string>()
  /** Delivery ids sent (decisions, function results, cancels), and `subject|delivery` delivered. */
  const deliveriesSent = new Set<string>()
  const deliveriesDelivered = new Set<string>()
  /** `run|input_id` whose receipt said accepted. */
  const acceptedReceipts = new Set<string>()
  const cancels = new Set<string>()
  const terminal = new Map<string, string>()
  const workspace = WorkspaceInvariants.make(ws, fail, tick, exercise)

  const scan = (where: string, text: string, allowFramesOnly: boolean) => {
    tick("secrets")
    for (const s of secrets.everywhere) if (text.includes(s)) fail(`secrets: a credential appeared in ${where}`)
    if (!allowFramesOnly) for (const s of secrets.framesOnly) if (text.includes(s)) fail(`secrets: agent_options secret appeared in ${where}`)
  }

  const frame = (event: FrameEvent, proc: number) => {
    const toCore = event.direction === "toCore"
    const decoded: Result.Result<Messages.Message, unknown> = toCore
      ? Messages.decodeRuntimeToCore(event.text)
      : Messages.decodeCoreToRuntime(event.text)
    tick("codec")
    if (Result.isFailure(decoded)) {
      fail(`codec: a ${event.direction} frame on connection ${event.connection} failed the strict decoder`)
      return
    }
    const m = decoded.success as Messages.Message & { readonly id?: string; readonly payload?: any }
    scan(`a ${m.type} frame`, event.text, m.type === "execution_prepare" || m.type === "prompt_request")
    if (!toCore) {
      // No replay: every input, decision and function result is sent at most once, on any connection.
      const run = m.id ?? ""
      if (m.type === "prompt_steer") {
        tick("no_replay")
        const key = `${run}|${m.payload.input_id}`
        const before = steersSent.get(key)
        if (before !== undefined && before.connection !== event.connection) {
          fail(`no replay: input ${m.payload.input_id} of ${run} was sent again after a reconnect`)
        } else if (before !== undefined && !before.refusedNotReady) {
          fail(`no replay: input ${m.payload.input_id} of ${run} was sent again without a not_ready refusal`)
        }
        steersSent.set(key, { connection: event.connection, refusedNotReady: false })
        if (event.delivered) steersDelivered.add(key)
      } else if (
        m.type === "permission_decision" || m.type === "prompt_for_user_choice_decision" || m.type === "function_result"
      ) {
        tick("no_replay")
        const delivery = String(m.payload.delivery_id)
        if (deliveriesSent.has(delivery)) fail(`no replay: ${m.type} delivery ${delivery} was sent twice`)
        deliveriesSent.add(delivery)
        if (event.delivered) deliveriesDelivered.add(`${m.type === "function_result" ? m.payload.call_id : m.id}|${delivery}`)
        if (m.type === "function_result") deliveriesDelivered.add(`${run}|${delivery}`)
      } else if (m.type === "prompt_cancel" && event.delivered && m.payload.delivery_id !== undefined) {
        deliveriesDelivered.add(`${run}|${m.payload.delivery_id}`)
      } else if ((m.type === "workspace_write" || m.type === "runtime_prepare") && event.delivered) {
        workspace.received(m.type, run, m.payload, event.connection)
      }
      return
    }
    if (!event.delivered) return
    switch (m.type) {
      case "prompt_steer_ack": {
        tick("receipts")
        const key = `${m.id}|${m.payload.input_id}`
        if (m.payload.input_id !== "" && !steersDelivered.has(key)) {
          fail(`receipts: a steer receipt for ${key} matches no input Core delivered`)
        }
        if (m.payload.accepted === true) acceptedReceipts.add(key)
        const sent = steersSent.get(key)
        if (sent !== undefined && m.payload.error_code === "not_ready" && sent.connection === event.connection) {
          sent.refusedNotReady = true
        }
        break
      }
      case "interaction_decision_ack": {
        tick("receipts")
        const key = `${m.id}|${m.payload.delivery_id}`
        if (!deliveriesDelivered.has(key)) fail(`receipts: a decision receipt for ${key} matches no delivery Core sent`)
        break
      }
      case "preparation_status": {
        if (m.payload.state === "released" && m.payload.executor_id !== undefined) {
          tick("ownership")
          const native = nativeExecutor(ledger, proc, m.payload.executor_id)
          if (native !== undefined && !native.closed && (native.closing > 0 || native.activeRun !== undefined)) {
            fail(`ownership: released published for ${m.payload.executor_id} before its cleanup or settlement was confirmed`)
          }
        }
        break
      }
      default:
        break
    }
    if (m.id !== undefined) {
      count(deliveredFrames, canonical(withoutTrace(JSON.parse(event.text))))
      if (m.type === "done") {
        tick("ownership")
        doneDelivered.add(m.id)
        // A done proves settlement: the native Turn must have settled (or its Executor been closed) first.
        for (const native of ledger.executors.values()) {
          if (native.key.startsWith(`${proc}/`) && native.activeRun === m.id && !native.closed) {
            fail(`ownership: done for ${m.id} sent while its native Turn on ${native.key} had not settled`)
          }
        }
      }
    }
  }

  const store = (turnIds: ReadonlyArray<string>, turnStore: TurnStore["Service"]) =>
    Effect.gen(function* () {
      for (const turnId of turnIds) {
        const found = yield* turnStore.get(turnId).pipe(Effect.orElseSucceed(() => Option.none()))
        if (Option.isNone(found)) continue
        const turn = found.value
        tick("no_invented_terminal")
        // Every Turn ends exactly once, with a status the facts prove.
        const before = terminal.get(turnId)
        const done = turn.status === "completed" || turn.status === "failed" || turn.status === "cancelled"
        if (before !== undefined && before !== turn.status) fail(`terminal: ${turnId} ended ${before}, then became ${turn.status}`)
        if (done && before === undefined) {
          terminal.set(turnId, turn.status)
          if (turn.status === "completed" && !doneDelivered.has(turn.runId)) {
            fail(`no invented terminal: ${turnId} recorded completed without the Runtime's done for ${turn.runId}`)
          }
          if (turn.status === "cancelled" && !cancels.has(turnId)) fail(`no invented terminal: ${turnId} recorded cancelled without a cancel`)
        }
        // Core never invents a Run frame: every journaled frame is one the Runtime delivered (with multiplicity).
        const events = yield* turnStore.events(turnId, 0, "frame").pipe(Effect.orElseSucceed(() => []))
        const seen = new Map<string, number>()
        for (const e of events) {
          tick("no_invented_terminal")
          const key = canonical(withoutTrace(JSON.parse(e.bodyJson)))
          const n = count(seen, key).get(key)!
          if (n > (deliveredFrames.get(key) ?? 0)) {
            fail(`no invented terminal: ${turnId} journaled a ${e.type} frame the Runtime never delivered (or more often)`)
          }
        }
        // The input cursor advances only on accepted, and every accepted input had an accepted receipt.
        const inputs = yield* turnStore.inputs(turnId).pipe(Effect.orElseSucceed(() => []))
        const accepted = inputs.filter((i) => i.status === "accepted")
        tick("receipts", 1 + accepted.length)
        if (turn.inputCursor !== accepted.length) {
          fail(`receipts: ${turnId} input cursor ${turn.inputCursor} but ${accepted.length} inputs accepted`)
        }
        for (const input of accepted) {
          if (!acceptedReceipts.has(`${turn.runId}|${input.inputId}`)) {
            fail(`receipts: ${turnId} input ${input.inputId} accepted without an accepted receipt`)
          }
        }
      }
    })

  return {
    violations,
    checks: () => families.reduce((n, f) => n + byFamily[f], 0),
    checksBy: () => ({ ...byFamily }),
    counted: tick,
    frame,
    logLine: (line) => scan("a log line", line, false),
    errorText: (text) => scan("an error", text, false),
    cancelAsked: (turnId) => void cancels.add(turnId),
    store,
    capacity: (proc, maxActive) => {
      tick("ownership")
      const active = activeCount(ledger, proc)
      if (active > maxActive) fail(`ownership: ${active} Executors active natively in process ${proc}, bound ${maxActive}`)
      for (const v of ledger.violations.splice(0)) fail(v)
    },
    workspace
  }
}
