import { it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { codexFixture, prepareRequest, recorder, text } from "../test/support/fakeResponsesCodex.js"
import { unsafeMake } from "../src/proto/Ids.js"
it.live("resume debug", () => Effect.gen(function* () {
  const { harness } = yield* codexFixture
  const a = yield* harness.prepare(prepareRequest(harness))
  yield* Effect.flatMap(a.startTurn(unsafeMake.runId("r1"), text("remember PLUM"), recorder().sink), (t) => t.awaitSettlement)
  const thread = Option.getOrThrow(yield* a.nativeSessionId)
  console.log("turn1 done", thread)
  yield* a.close
  console.log("closed")
  const b = yield* harness.prepare(prepareRequest(harness, { agent_session_id: thread })).pipe(Effect.timeout("15 seconds"), Effect.exit)
  console.log("prepared b", JSON.stringify(b).slice(0, 300))
}), 60000)
