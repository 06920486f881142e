/**
 * Property tests of every message schema of both catalogues with Effect's Schema-derived engine (decision
 * T1: `it.prop` from @effect/vitest over `Arbitrary.schema`). Generated valid messages survive
 * `encodeMessage` → decode unchanged; the same messages, mutated on the wire (an unknown member at any
 * strict object, a required member dropped, a member nulled where the schema has no null, an oversized or
 * missing id), are refused with the matching `InvalidFrame` code. Run counts stay small so the suite is fast.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Schema } from "effect"
import { Messages } from "../../src/proto/index.js"
import { catalogueOf, decode, type Direction, encode, getErr, getOk, invalidFrame } from "./support/frames.js"
import {
  acceptsNull,
  neverMentions,
  oversizedId,
  payloadAst,
  requiredMembers,
  strictObjectPaths,
  withNullMember,
  withoutMember,
  withUnknownMember
} from "./support/wireShape.js"

const runs = { arbitrary: { runs: 20, size: 12 } }

/** At most `n` items spread evenly over `items` (keeps large generated payloads cheap to mutate). */
const spread = <A>(items: ReadonlyArray<A>, n: number): ReadonlyArray<A> =>
  items.length <= n ? items : Array.from({ length: n }, (_, i) => items[Math.floor((i * (items.length - 1)) / (n - 1))]!)

/** A decoded value of plain objects, with -0 read as 0 (JSON has no negative zero). */
const plain = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(plain)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
    : Object.is(value, -0)
    ? 0
    : value

/**
 * What the receiver sees of a generated message: the envelope drops an empty trace and one over 256
 * characters (E7); everything else arrives unchanged.
 */
const asReceived = (message: Messages.Message): unknown => {
  const copy = plain(message) as Record<string, unknown>
  const trace = copy["trace"]
  if (typeof trace === "string" && (trace === "" || trace.length > 256)) delete copy["trace"]
  return copy
}

const directions: ReadonlyArray<Direction> = ["coreToRuntime", "runtimeToCore"]

for (const direction of directions) {
  const catalogue = catalogueOf(direction)
  describe(`${direction === "coreToRuntime" ? "Core → Runtime" : "Runtime → Core"} properties`, () => {
    for (const [type, definition] of Object.entries(catalogue)) {
      const schema = definition.schema as unknown as Schema.Schema<Messages.Message>
      const payload = payloadAst(definition.schema)

      it.prop(`${type}: generated messages survive encodeMessage and decode unchanged`, [schema], ([message]) => {
        assert.deepStrictEqual(getOk(decode(direction, encode(message))), asReceived(message))
      }, runs)

      it.prop(`${type}: mutated messages are refused with the matching InvalidFrame code`, [schema], ([message]) => {
        const frame = JSON.parse(encode(message)) as Record<string, unknown>
        const expectRefused = (mutated: Record<string, unknown>, code: "invalid_payload") => {
          const text = JSON.stringify(mutated)
          const id = definition.id === "none" || mutated["id"] === undefined ? {} : { id: mutated["id"] as string }
          assert.deepStrictEqual(getErr(decode(direction, text)), invalidFrame(text, { code, type, ...id }))
        }
        if (payload !== undefined) {
          for (const path of [[], ...spread(strictObjectPaths(payload, frame["payload"]), 6)]) {
            expectRefused(withUnknownMember(frame, path), "invalid_payload")
          }
          for (const member of requiredMembers(payload)) expectRefused(withoutMember(frame, member), "invalid_payload")
          for (const signature of payload.propertySignatures) {
            const member = String(signature.name)
            if (!acceptsNull(payload, member)) expectRefused(withNullMember(frame, member), "invalid_payload")
          }
        }
        if (definition.id !== "none") {
          const oversized = JSON.stringify({ ...frame, id: oversizedId("LEAKCHECK-") })
          const error = getErr(decode(direction, oversized))
          assert.deepStrictEqual(error, invalidFrame(oversized, { code: "id_too_large", type }))
          assert.isTrue(neverMentions(error, "LEAKCHECK"))
        }
        if (definition.id === "required") {
          const { id: _dropped, ...withoutId } = frame
          const text = JSON.stringify(withoutId)
          assert.deepStrictEqual(getErr(decode(direction, text)), invalidFrame(text, { code: "missing_id", type }))
        }
      }, runs)
    }
  })
}
