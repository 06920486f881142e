/**
 * The ledger of one Run's native user messages (reference harnesses.md §3.5): every uuid written for the Run
 * (initial input and steered input), which of them Claude Code consumed (`user_message_uuids` on a frame, or
 * `command_lifecycle started/completed`), which finished (`completed` / `cancelled`), and the receipt waiters
 * of steered input. A uuid cancelled before consumption rejects its waiter (a definite "not applied"). The
 * Run may settle only when every uuid finished, so `done` always follows the consumption of every input.
 */
import { Deferred, Effect } from "effect"
import { NativeRejected, type SteerError } from "../Harness.js"

/** At most this many user messages per Run (the native ledger's bound). */
export const maxRunInputs = 64

export const makeInputLedger = () => {
  const uuids = new Set<string>()
  const consumed = new Set<string>()
  const finished = new Set<string>()
  const cancelled = new Set<string>()
  const waiters = new Map<string, Deferred.Deferred<void, SteerError>>()

  const take = (uuid: string) => {
    const waiter = waiters.get(uuid)
    waiters.delete(uuid)
    return waiter
  }

  const markConsumed = (list: ReadonlyArray<string>) =>
    Effect.forEach(list, (uuid) => {
      if (!uuids.has(uuid) || consumed.has(uuid)) return Effect.void
      consumed.add(uuid)
      const waiter = take(uuid)
      return waiter === undefined ? Effect.void : Deferred.succeed(waiter, undefined)
    }, { discard: true })

  return {
    /** Records a uuid before its line is written, so no native event about it can be missed. */
    add: (uuid: string, waiter?: Deferred.Deferred<void, SteerError>) => {
      uuids.add(uuid)
      if (waiter !== undefined) waiters.set(uuid, waiter)
    },
    has: (uuid: string) => uuids.has(uuid),
    room: (n: number) => uuids.size + n <= maxRunInputs,
    markConsumed,
    /** Applies a `command_lifecycle` state of one of our uuids. */
    lifecycle: (uuid: string, state: string) =>
      Effect.gen(function* () {
        if (!uuids.has(uuid)) return
        if (state === "started" || state === "completed") yield* markConsumed([uuid])
        if (state === "cancelled") {
          cancelled.add(uuid)
          const waiter = take(uuid)
          if (waiter !== undefined && !consumed.has(uuid)) {
            yield* Deferred.fail(waiter, new NativeRejected({ operation: "steer", reason: "cancelled natively before consumption" }))
          }
        }
        if (state === "completed" || state === "cancelled") finished.add(uuid)
      }),
    /** Every written uuid finished natively. */
    allFinished: () => uuids.size > 0 && finished.size >= uuids.size,
    anyCancelled: () => cancelled.size > 0,
    /** The Run ended: every waiter still open is a definite rejection. */
    rejectOpen: Effect.suspend(() => {
      const rejected = new NativeRejected({ operation: "steer", reason: "the turn ended before the input was consumed" })
      const open = [...waiters.values()]
      waiters.clear()
      return Effect.forEach(open, (w) => Deferred.fail(w, rejected), { discard: true })
    })
  }
}
