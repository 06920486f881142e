/**
 * Identifiers the dev Core generates: Sessions, Turns, Runs, active inputs, delivery ids and credential
 * rows. The production layer uses random UUIDs; the test layer yields `session-1`, `turn-1`, … so tests
 * are deterministic. Nothing else in the dev Core generates an id.
 */
import { Context, Effect, Layer, Ref } from "effect"
import { randomUUID } from "node:crypto"

export type IdKind = "session" | "turn" | "run" | "input" | "delivery" | "credential" | "preparation" | "operation" | "suspension" | "request"

export class DevIds extends Context.Service<DevIds, {
  /** A fresh id of that kind, unique within this Core's store. */
  readonly next: (kind: IdKind) => Effect.Effect<string>
}>()("agentwire/core/dev/DevIds") {
  /** Random UUIDs (`run-` / `in-` / `dlv-` prefixes keep wire ids readable in logs and the live view). */
  static readonly layer = Layer.succeed(DevIds, DevIds.of({
    next: (kind) =>
      Effect.sync(() => {
        const uuid = randomUUID()
        switch (kind) {
          case "run":
            return `run-${uuid}`
          case "input":
            return `in-${uuid}`
          case "delivery":
            return `dlv-${uuid}`
          case "preparation":
            return `prep-${uuid}`
          default:
            return uuid
        }
      })
  }))

  /** Deterministic ids: `<kind>-1`, `<kind>-2`, … per kind. */
  static readonly layerTest = Layer.effect(
    DevIds,
    Effect.gen(function* () {
      const counters = yield* Ref.make(new Map<IdKind, number>())
      return DevIds.of({
        next: (kind) =>
          Ref.modify(counters, (m) => {
            const n = (m.get(kind) ?? 0) + 1
            return [`${kind}-${n}`, new Map(m).set(kind, n)]
          })
      })
    })
  )
}
