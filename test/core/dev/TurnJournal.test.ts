import { assert, describe, it } from "@effect/vitest"
import { Layer, Option } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { fromEntry, toEntry } from "../../../src/core/dev/TurnJournal.js"
import type * as Outcome from "../../../src/core/Outcome.js"
import { Ids } from "../../../src/proto/index.js"
import { turnJournalCases } from "./cases/TurnJournalCases.js"

const run = Ids.unsafeMake.runId("run-1")
const delta = (n: number): Outcome.TurnFact => ({
  _tag: "RunEvent",
  event: { type: "delta", id: run, payload: { delta: `d${n}`, sequence: n } }
})

describe("TurnJournal", () => {
  turnJournalCases(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest)))

  it("stores Run events as their wire frame and other facts as encoded facts, and reads both back", () => {
    const frame = toEntry(delta(7))
    assert.deepStrictEqual(frame.kind, "frame")
    assert.deepStrictEqual(JSON.parse(frame.bodyJson), { type: "delta", id: "run-1", payload: { delta: "d7", sequence: 7 } })
    const fact: Outcome.TurnFact = { _tag: "InputUnknown", input_id: "in-1", reason: "written_ack_timeout" }
    const entry = toEntry(fact)
    const stored = { seq: 1, attempt: 1, receivedAtMs: 0, ...entry }
    assert.deepStrictEqual(fromEntry(stored), Option.some(fact))
    assert.deepStrictEqual(fromEntry({ seq: 2, attempt: 1, receivedAtMs: 0, ...frame }), Option.some(delta(7)))
    assert.deepStrictEqual(fromEntry({ ...stored, bodyJson: "{not json" }), Option.none())
  })
})
