/**
 * The stored JSON of a Turn fact that is not a Run event (issue 18: encoding facts through `Schema` was about 2.4 %
 * of the dev Core's main thread per Turn). The facts every Turn stores (`Dispatching`, `Dispatched`,
 * `PreparationStatus`) and the steer facts (`InputWritten`, `InputAccepted`) are written here directly, in the
 * schema's key order: byte for byte what `JSON.stringify(Schema.encodeUnknownSync(TurnFact)(fact))` writes, which
 * `test/core/dev/FactJson.test.ts` checks over every optional field present and absent, extra properties and shuffled
 * key orders. Every other fact, and any field that is not of its schema's JSON type (or a literal outside its set),
 * goes through the schema, which validates it and throws as before. A branded id (executor, handle, Run) is checked
 * for being a string only: the frame it came from was decoded with its schema.
 */
import { Schema } from "effect"
import { ErrorCodes, Preparation } from "../../proto/index.js"
import { DispatchType, TurnFact } from "../TurnFact.js"

const encodeFact = Schema.encodeUnknownSync(TurnFact)

/** Thrown inside the direct writer when a field is not what its schema says: the schema answers instead. */
const unusual: unique symbol = Symbol("unusual")

type Fields = Readonly<Record<string, unknown>>

const dispatchTypes: ReadonlySet<unknown> = new Set(DispatchType.literals)
const preparationStates: ReadonlySet<unknown> = new Set(Preparation.PreparationState.literals)
const preparationErrors: ReadonlySet<unknown> = new Set(ErrorCodes.PreparationErrorCode.literals)
const controlOperations: ReadonlySet<unknown> = new Set(Preparation.ControlOperation.literals)

const text = (v: unknown): string => {
  if (typeof v !== "string") throw unusual
  return JSON.stringify(v)
}
const literal = (set: ReadonlySet<unknown>) => (v: unknown): string => {
  if (!set.has(v)) throw unusual
  return JSON.stringify(v)
}
const count = (v: unknown): string => {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw unusual
  return JSON.stringify(v)
}
const flag = (v: unknown): string => {
  if (typeof v !== "boolean") throw unusual
  return v ? "true" : "false"
}
const dispatchType = literal(dispatchTypes)
const preparationState = literal(preparationStates)
const preparationError = literal(preparationErrors)
const controlOperation = literal(controlOperations)

/** `,"key":value` for a present key, "" for an absent one; a key present with `undefined` is unusual (exact optional). */
const optional = (o: Fields, key: string, write: (v: unknown) => string): string => {
  const v = o[key]
  if (v === undefined) {
    if (Object.hasOwn(o, key)) throw unusual
    return ""
  }
  return `,"${key}":${write(v)}`
}

/** `Preparation.PreparationStatusPayload` in its schema's key order. */
const statusJson = (s: unknown): string => {
  if (typeof s !== "object" || s === null) throw unusual
  const o = s as Fields
  const fields = optional(o, "executor_id", text) + optional(o, "reused", flag) + optional(o, "handle", text) +
    `,"revision":${count(o["revision"])},"state":${preparationState(o["state"])}` + optional(o, "expires_at", count) +
    optional(o, "run_id", text) + optional(o, "error_code", preparationError) + optional(o, "operation", controlOperation)
  return `{${fields.slice(1)}}`
}

const direct = (fact: Fields): string | undefined => {
  switch (fact["_tag"]) {
    case "Dispatching":
      return `{"_tag":"Dispatching","type":${dispatchType(fact["type"])}}`
    case "Dispatched":
      return `{"_tag":"Dispatched","type":${dispatchType(fact["type"])}${optional(fact, "delivery_id", text)}${optional(fact, "input_id", text)}}`
    case "PreparationStatus":
      return `{"_tag":"PreparationStatus","status":${statusJson(fact["status"])}}`
    case "InputWritten":
      return `{"_tag":"InputWritten","input_id":${text(fact["input_id"])}}`
    case "InputAccepted":
      return `{"_tag":"InputAccepted","input_id":${text(fact["input_id"])}}`
    default:
      return undefined
  }
}

/** The stored JSON of `fact` (not a `RunEvent`, which is stored as its frame). */
export const factJson = (fact: TurnFact): string => {
  try {
    const written = direct(fact as unknown as Fields)
    if (written !== undefined) return written
  } catch (e) {
    if (e !== unusual) throw e
  }
  return JSON.stringify(encodeFact(fact))
}
