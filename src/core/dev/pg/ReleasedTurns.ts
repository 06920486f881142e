/**
 * Queued Turns released from a dead node (docs/multi-node.md "Queued Turns of a dead node"): the lease sweeper
 * clears `claimed_by` on the queued Turns of a node whose `core_nodes` row expired (pg/TurnClaims.ts); the
 * node the Turn's device (else its Session's bound device) is connected to claims each (`WHERE claimed_by IS
 * NULL`: one node wins) and launches its runner, exactly as a node resumes its own queued Turns at start.
 * A Turn whose device is connected to no node stays queued and unclaimed until its device connects.
 */
import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { Ids } from "../../../proto/index.js"
import { Gateway } from "../../Gateway.js"
import { planFor } from "../Recovery.js"
import type { SessionStore } from "../SessionStore.js"
import type { StoreFailed } from "../StoreErrors.js"
import { TurnRunner } from "../TurnRunner.js"
import { TurnStore } from "../TurnStore.js"
import { unclaimedQueued } from "./TurnClaims.js"

const Batch = 64

/** One pass: claims and launches the released Turns whose device is connected here; their ids. */
export const pickupReleased = (
  claim: (turnId: string) => Effect.Effect<boolean, unknown, SqlClient.SqlClient>
): Effect.Effect<ReadonlyArray<string>, StoreFailed, SqlClient.SqlClient | TurnStore | SessionStore | Gateway | TurnRunner> =>
  Effect.gen(function* () {
    const turns = yield* TurnStore
    const gateway = yield* Gateway
    const runner = yield* TurnRunner
    const launched: Array<string> = []
    for (const turnId of yield* unclaimedQueued(Batch)) {
      if (Option.isSome(runner.active(turnId))) continue
      const record = yield* turns.get(turnId)
      if (Option.isNone(record) || record.value.status !== "queued") continue
      const plan = yield* planFor(record.value)
      if (Option.isNone(plan)) continue
      if (Option.isNone(yield* gateway.session(Ids.unsafeMake.deviceId(plan.value.deviceId)))) continue
      if (!(yield* claim(turnId).pipe(Effect.orElseSucceed(() => false)))) continue
      yield* runner.launch(plan.value)
      launched.push(turnId)
    }
    if (launched.length > 0) {
      yield* Effect.logInfo("dispatching queued Turns released from a dead node").pipe(
        Effect.annotateLogs({ turns: launched.length, turn_ids: launched.slice(0, 20).join(",") })
      )
    }
    return launched
  })
