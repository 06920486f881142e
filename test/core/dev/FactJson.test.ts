/**
 * `FactJson.factJson` writes the stored JSON of the facts every Turn stores directly: it must be byte for byte what
 * the schema's encoding writes (`JSON.stringify(Schema.encodeUnknownSync(TurnFact)(fact))`), for every optional field
 * present and absent, for input objects with extra properties or keys in another order, and for strings that JSON
 * escapes; a fact the schema refuses is refused the same way (it throws).
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { Preparation } from "../../../src/proto/index.js"
import { factJson } from "../../../src/core/dev/FactJson.js"
import { DispatchType, TurnFact } from "../../../src/core/TurnFact.js"

const viaSchema = (fact: unknown): string => JSON.stringify(Schema.encodeUnknownSync(TurnFact)(fact))

/** Either the JSON both write, or the same refusal (both throw). */
const same = (fact: unknown) => {
  let expected: string | undefined
  try {
    expected = viaSchema(fact)
  } catch {
    expected = undefined
  }
  if (expected === undefined) {
    assert.throws(() => factJson(fact as TurnFact), undefined, undefined, JSON.stringify(fact))
  } else {
    assert.strictEqual(factJson(fact as TurnFact), expected)
  }
}

/** The same object with its keys in reverse order. */
const reversed = (o: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(Object.entries(o).reverse())

const awkward = ["plain", "quote \" and backslash \\", "line\nbreak\u0001", "é ✓ 𝄞", "lone \ud800 surrogate", ""]

const optionalStatusFields: ReadonlyArray<readonly [string, unknown]> = [
  ["executor_id", "3fc2c60e-b26e-459d-ae65-eee119c356fb"],
  ["reused", true],
  ["handle", "f55647fc-55c7-4d7c-b0d5-339467ed3fdc"],
  ["expires_at", 1796000000000],
  ["run_id", "run-01a241e2-e55e-76a5-b4ed-9eb190d0b5f4"],
  ["error_code", "capacity_exhausted"],
  ["operation", "execution_start"]
]

describe("FactJson", () => {
  it("Dispatching and Dispatched: every type, optional ids present and absent, extra properties, any key order", () => {
    for (const type of DispatchType.literals) {
      same({ _tag: "Dispatching", type })
      same(reversed({ _tag: "Dispatching", type, extra: 1 }))
      for (const delivery of [undefined, ...awkward]) {
        for (const input of [undefined, "input-1", "\"quoted\""]) {
          const fact: Record<string, unknown> = { _tag: "Dispatched", type }
          if (delivery !== undefined) fact["delivery_id"] = delivery
          if (input !== undefined) fact["input_id"] = input
          same(fact)
          same(reversed({ ...fact, note: "not in the schema" }))
        }
      }
    }
  })

  it("PreparationStatus: every state with every subset of the optional fields, in any key order", () => {
    for (const state of Preparation.PreparationState.literals) {
      for (let mask = 0; mask < 1 << optionalStatusFields.length; mask++) {
        const status: Record<string, unknown> = { revision: mask % 5, state }
        optionalStatusFields.forEach(([key, value], i) => {
          if ((mask & (1 << i)) !== 0) status[key] = value
        })
        same({ _tag: "PreparationStatus", status })
        same({ status: reversed({ ...status, extra: [1, 2] }), _tag: "PreparationStatus" })
      }
    }
    same({ _tag: "PreparationStatus", status: { revision: 1, state: "ready", reused: false } })
  })

  it("steer facts with strings JSON escapes", () => {
    for (const id of awkward) {
      same({ _tag: "InputWritten", input_id: id })
      same({ _tag: "InputAccepted", input_id: id })
    }
  })

  it("refuses what the schema refuses: a literal outside its set, a wrong type, a negative revision, an explicit undefined", () => {
    const refused: ReadonlyArray<unknown> = [
      { _tag: "Dispatching", type: "execution_bogus" },
      { _tag: "Dispatching" },
      { _tag: "Dispatched", type: "execution_start", delivery_id: 7 },
      { _tag: "Dispatched", type: "execution_start", delivery_id: undefined },
      { _tag: "PreparationStatus", status: { revision: -1, state: "ready" } },
      { _tag: "PreparationStatus", status: { revision: 1.5, state: "ready" } },
      { _tag: "PreparationStatus", status: { revision: 1, state: "sleeping" } },
      { _tag: "PreparationStatus", status: { revision: 1, state: "failed", error_code: "no_such_code" } },
      { _tag: "PreparationStatus", status: { revision: 1, state: "ready", reused: "yes" } },
      { _tag: "PreparationStatus", status: null },
      { _tag: "InputAccepted", input_id: null }
    ]
    for (const fact of refused) {
      assert.throws(() => viaSchema(fact), undefined, undefined, JSON.stringify(fact))
      same(fact)
    }
  })

  it("every other fact goes through the schema", () => {
    same({ _tag: "CancelUnconfirmed", delivery_id: "d-1", reason: "no_receipt" })
    same({ _tag: "RunObservationEnded", reason: "connection_lost" })
    same({ _tag: "InputRejected", input_id: "i-1", code: "run_not_active" })
    same({ _tag: "Abandoned" })
    same({ _tag: "NotDispatched", type: "execution_start", reason: "queue_full", delivery_id: "d-2" })
  })
})
