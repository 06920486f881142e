/**
 * How a Turn's runner records the facts of its delivery: each fact journaled (facts that change no other record in
 * groups, one write per group; the Run's dispatch mark in the same transaction as its `Dispatched` fact), then the records it
 * changes (active-input status, withdrawn interactions); an interaction request is stored pending before its
 * frame, so it is answerable once the frame is seen. Each write is retried until stored and fenced on the
 * attempt's owner lease (the runner's `durable`).
 *
 * The `Dispatched` of a Turn's `execution_prepare` or `execution_start` that arrives alone is held and stored with the
 * Turn's next facts, in order, in their write (issue 18: alone, each took a group commit, a runner suspension and an
 * event-stream write of its own, two of a Turn's six). It is confirmed to the delivery layer when held (no send waits
 * on a `Dispatched`: a boundary is a `Dispatching`, and a later one is confirmed only once stored, with everything
 * before it). A crash before it is stored loses only what the `Dispatching` before it already says: the request may
 * have left. When the Turn's facts end, what is held rides the outcome's transaction (below), or, when the attempt
 * ends unsettled, `flush` stores it.
 *
 * Once the Turn is finishing (`Turn.isFinishing`: its status known and its Run's observation ended, so the facts
 * still to come are the last few, none waiting on the peer), facts that change no other record are held the same way, up to
 * `maxHeldAtSettle`, and stored in the transaction that writes the outcome (`takeHeld`, `JournalWriter.settle`;
 * issue 18, "settlefacts": the Run's last frames took a commit, a runner suspension and an event-stream write of
 * their own). Nothing is published before it is stored, so no follower sees a held fact that a crash then loses; such a
 * crash leaves the Turn to be reconciled from what was stored before (`JournalOutcome.ts`).
 */
import { Effect } from "effect"
import type { Functions as FunctionsProto } from "../../proto/index.js"
import * as Interactions from "../Interactions.js"
import type * as Outcome from "../Outcome.js"
import type { LeaseLost } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"
import type { JournalWriter } from "./TurnJournal.js"
import type { AppendOptions, InteractionKind, TurnStore } from "./TurnStore.js"

/** The part of a running Turn the facts update. */
export interface FactTarget {
  readonly turnId: string
  pending: ReadonlyMap<string, Interactions.PendingInteraction>
  readonly calls: Map<string, FunctionsProto.FunctionCallPayload>
  /** A `Dispatched` held until the Turn's next facts (module comment); confirmed already. */
  held?: Array<Outcome.TurnFact> | undefined
}

/** Nothing held (`takeHeld`'s answer when no fact waits). */
export const nothingHeld: { readonly facts: ReadonlyArray<Outcome.TurnFact>; readonly options: AppendOptions | undefined } = {
  facts: [],
  options: undefined
}

/** How many facts may wait for the outcome's transaction once the Turn is finishing (module comment). */
export const maxHeldAtSettle = 256

export const make = <T extends FactTarget>(
  store: TurnStore["Service"],
  durable: <A>(a: T, operation: string, write: Effect.Effect<A, StoreFailed | LeaseLost>) => Effect.Effect<A, LeaseLost>
) => {
  /** An interaction request is stored pending BEFORE its frame is journaled (and so published): an operator
   * who answers the moment the frame reaches them finds it answerable. */
  const onInteractionRequest = (
    a: T,
    writer: JournalWriter,
    fact: Extract<Outcome.TurnFact, { _tag: "RunEvent" }>,
    request: { readonly kind: InteractionKind; readonly id: string; readonly payload: unknown }
  ) =>
    Effect.gen(function* () {
      a.pending = Interactions.trackInteractions(a.pending, fact.event)
      if (request.kind === "function_call" && fact.event.type === "function_call") a.calls.set(request.id, fact.event.payload)
      yield* durable(a, "interaction", store.recordInteraction(a.turnId, request.kind, request.id, request.payload))
      yield* durable(a, "journal", writer.record(fact))
      return yield* writer.notify("interaction", { kind: request.kind, interaction_id: request.id, status: "pending" })
    })

  /** What a journaled fact changes besides the journal, if anything (most facts: nothing). */
  const afterFact = (a: T, writer: JournalWriter, fact: Outcome.TurnFact): Effect.Effect<void, LeaseLost> | undefined => {
    // One rule for both paths: a fact that `onFacts` may group has nothing to do after its append.
    if (journalOnly(fact)) return undefined
    switch (fact._tag) {
      case "NotDispatched":
        return fact.type === "prompt_steer" && fact.input_id !== undefined
          ? inputStatus(a, writer, fact.input_id, "not_sent", fact.reason)
          : undefined
      case "InputWritten":
        return inputStatus(a, writer, fact.input_id, "written")
      case "InputAccepted":
        return Effect.flatMap(
          durable(a, "input", store.acceptInput(a.turnId, fact.input_id)),
          (position) => writer.notify("input", { input_id: fact.input_id, status: "accepted", position })
        )
      case "InputRejected":
        return inputStatus(a, writer, fact.input_id, "rejected", fact.code)
      case "InputUnknown":
        return inputStatus(a, writer, fact.input_id, "unknown", fact.reason)
      case "RunEvent":
        return onRunEvent(a, writer, fact.event)
      default:
        return undefined
    }
  }

  /** Journal-only facts in one append; a group with the Run's own `Dispatched` marks the Turn dispatched in it. */
  const recordGroup = (a: T, writer: JournalWriter, group: ReadonlyArray<Outcome.TurnFact>): Effect.Effect<void, LeaseLost> =>
    Effect.asVoid(durable(a, "journal", writer.recordAll(group, group.some(dispatchesRun) ? { markDispatched: true } : undefined)))

  /** One fact journaled, then the records it changes. A direct pipeline: this runs for every fact of a Turn. */
  const onFact = (a: T, writer: JournalWriter, fact: Outcome.TurnFact): Effect.Effect<void, LeaseLost> => {
    const request = fact._tag === "RunEvent" ? interactionRequest(fact.event) : undefined
    if (fact._tag === "RunEvent" && request !== undefined) return onInteractionRequest(a, writer, fact, request)
    // The Run's own dispatch marks the Turn dispatched in the same transaction as its fact.
    const markDispatched = dispatchesRun(fact)
    const stored = durable(a, "journal", writer.record(fact, markDispatched ? { markDispatched } : undefined))
    const after = afterFact(a, writer, fact)
    return after === undefined ? Effect.asVoid(stored) : Effect.andThen(stored, after)
  }

  /**
   * The facts available at once, in order: runs of facts that change no record but the journal grouped (one
   * write, issue 18: a Turn's preparation status and its `Dispatching`, or its Run events, arrive together), every
   * other fact alone. A group with the Run's own `Dispatched` marks the Turn dispatched in its transaction.
   */
  const onFacts = (
    a: T,
    writer: JournalWriter,
    arrived: ReadonlyArray<Outcome.TurnFact>,
    journaled: Effect.Effect<void>,
    finishing?: () => boolean
  ): Effect.Effect<void, LeaseLost> => {
    if (arrived.length > 0 && (arrived.every(heldBack) || heldForOutcome(a, arrived, finishing))) {
      const held = (a.held ??= [])
      let confirmed: Effect.Effect<void> = Effect.void
      for (const fact of arrived) {
        held.push(fact)
        confirmed = Effect.andThen(confirmed, journaled)
      }
      return confirmed
    }
    // What was held goes first, in the same writes; it was confirmed when held.
    const held = a.held
    a.held = undefined
    const facts = held === undefined ? arrived : held.concat(arrived)
    const confirmedBefore = held === undefined ? 0 : held.length
    const confirm = (k: number): Effect.Effect<void> => k < confirmedBefore ? Effect.void : journaled
    const from = (i: number): Effect.Effect<void, LeaseLost> => {
      if (i >= facts.length) return Effect.void
      let j = i
      while (j < facts.length && journalOnly(facts[j]!)) j++
      // Each fact is confirmed to the delivery layer once stored, in order (one `journaled` per fact).
      let stored: Effect.Effect<void, LeaseLost>
      if (j <= i + 1) {
        stored = Effect.andThen(onFact(a, writer, facts[i]!), confirm(i))
        j = i + 1
      } else {
        stored = Effect.andThen(recordGroup(a, writer, facts.slice(i, j)), confirm(i))
        for (let k = i + 1; k < j; k++) stored = Effect.andThen(stored, confirm(k))
      }
      const next = j
      return next < facts.length ? Effect.andThen(stored, Effect.suspend(() => from(next))) : stored
    }
    return from(0)
  }

  /**
   * What is held when the Turn settles, cleared: for the outcome's transaction (`JournalWriter.settle`), with the
   * Run's dispatch mark when one of them dispatched it.
   */
  const takeHeld = (a: T): { readonly facts: ReadonlyArray<Outcome.TurnFact>; readonly options: AppendOptions | undefined } => {
    const held = a.held ?? []
    a.held = undefined
    return { facts: held, options: held.some(dispatchesRun) ? { markDispatched: true } : undefined }
  }

  /** Stores what is held (the Turn's facts ended unsettled right after a `Dispatched`). */
  const flush = (a: T, writer: JournalWriter): Effect.Effect<void, LeaseLost> => {
    const held = a.held
    if (held === undefined) return Effect.void
    a.held = undefined
    return recordGroup(a, writer, held)
  }

  const inputStatus = (
    a: T,
    writer: JournalWriter,
    inputId: string,
    status: "written" | "not_sent" | "rejected" | "unknown",
    code?: string
  ) =>
    Effect.gen(function* () {
      yield* durable(a, "input", store.setInputStatus(a.turnId, inputId, status, code))
      yield* writer.notify("input", { input_id: inputId, status, ...(code === undefined ? {} : { detail: code }) })
    })

  const onRunEvent = (a: T, writer: JournalWriter, event: Extract<Outcome.TurnFact, { _tag: "RunEvent" }>["event"]) =>
    Effect.gen(function* () {
      a.pending = Interactions.trackInteractions(a.pending, event)
      switch (event.type) {
        case "permission_cancel":
          yield* durable(a, "interaction", store.withdrawInteraction(a.turnId, "permission", event.id))
          return yield* writer.notify("interaction", { kind: "permission", interaction_id: event.id, status: "withdrawn" })
        default:
          return
      }
    })

  return { onFacts, flush, takeHeld }
}

/** The interaction a Run event asks for (a permission, a user choice, a function call), if any. */
const interactionRequest = (
  event: Extract<Outcome.TurnFact, { _tag: "RunEvent" }>["event"]
): { readonly kind: InteractionKind; readonly id: string; readonly payload: unknown } | undefined => {
  switch (event.type) {
    case "permission_request":
      return { kind: "permission", id: event.payload.request_id, payload: event.payload }
    case "prompt_for_user_choice":
      return { kind: "user_choice", id: event.payload.ask_id, payload: event.payload }
    case "function_call":
      return { kind: "function_call", id: event.payload.call_id, payload: event.payload }
    default:
      return undefined
  }
}

/** A `Dispatched` of the Turn's preparation or start: held when it arrives alone (module comment). */
const heldBack = (fact: Outcome.TurnFact): boolean =>
  fact._tag === "Dispatched" && (fact.type === "execution_prepare" || fact.type === "execution_start")

/** Facts that arrived once the Turn is finishing, held for its outcome's transaction while within the bound. */
const heldForOutcome = (a: FactTarget, arrived: ReadonlyArray<Outcome.TurnFact>, finishing: (() => boolean) | undefined): boolean =>
  finishing !== undefined && (a.held?.length ?? 0) + arrived.length <= maxHeldAtSettle && finishing() && arrived.every(journalOnly)

/** The Run's own dispatch (`execution_start`, `prompt_request`): the Turn is marked dispatched with this fact. */
const dispatchesRun = (fact: Outcome.TurnFact): boolean =>
  fact._tag === "Dispatched" && (fact.type === "execution_start" || fact.type === "prompt_request")

/**
 * A fact that updates no record but the journal (`afterFact` has nothing for it): not an input's receipt fact, a
 * steer's `NotDispatched` or a Run event asking for or withdrawing an interaction.
 */
const journalOnly = (fact: Outcome.TurnFact): boolean => {
  switch (fact._tag) {
    case "RunEvent":
      return !interactionTypes.has(fact.event.type)
    case "NotDispatched":
      return !(fact.type === "prompt_steer" && fact.input_id !== undefined)
    case "InputWritten":
    case "InputAccepted":
    case "InputRejected":
    case "InputUnknown":
      return false
    default:
      return true
  }
}
const interactionTypes: ReadonlySet<string> = new Set(["permission_request", "prompt_for_user_choice", "function_call", "permission_cancel"])
