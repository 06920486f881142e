/**
 * Identifiers the dev Core generates: Sessions, Turns, Runs, active inputs, delivery ids and credential
 * rows. The production layer uses time-ordered UUIDs (version 7, RFC 9562) for every kind but credential rows
 * (random, version 4); the test layer yields `session-1`, `turn-1`, … so tests are deterministic. Nothing else in
 * the dev Core generates an id.
 *
 * Why time-ordered (issue 18, docs/store.md "Keys"): the ids are the keys of the store's B-tree indexes (a Turn's
 * row, its journal's `(turn_id, seq)`, `run_id`). A random key puts each new row on a random leaf page, so one
 * group commit of a dozen rows of different Turns dirtied a dozen index pages, each written to the WAL (SQLite) or
 * as a full-page image (PostgreSQL) and fsynced; keys that grow with time land on the newest pages.
 */
import { Context, Effect, Layer, Ref } from "effect"
import { randomUUID } from "node:crypto"

/**
 * A version-7 UUID: the first 48 bits are the Unix time in milliseconds (big-endian), the rest is a random
 * version-4 UUID's (its version nibble set to 7; the variant bits are already RFC 9562's). Ids drawn in the same
 * millisecond are in random order among themselves; across milliseconds they sort by time, as strings too.
 * Built from `randomUUID` (Node caches its entropy: about a tenth of the cost of drawing 16 bytes per id).
 */
export const timeOrderedUuid = (nowMs: number = Date.now()): string => {
  const random = randomUUID()
  const time = nowMs.toString(16).padStart(12, "0")
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${random.slice(15)}`
}

export type IdKind = "session" | "turn" | "run" | "input" | "delivery" | "credential" | "preparation" | "operation" | "suspension" | "request"

export class DevIds extends Context.Service<DevIds, {
  /** A fresh id of that kind, unique within this Core's store. */
  readonly next: (kind: IdKind) => Effect.Effect<string>
}>()("agentwire/core/dev/DevIds") {
  /**
   * Time-ordered UUIDs; credential rows random (`run-` / `in-` / `dlv-` prefixes keep wire ids readable in logs and
   * the live view).
   */
  static readonly layer = Layer.succeed(DevIds, DevIds.of({
    next: (kind) =>
      Effect.sync(() => {
        const uuid = kind === "credential" ? randomUUID() : timeOrderedUuid()
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
