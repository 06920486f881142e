/**
 * The codec's in-place validator (src/proto/internal/fastValidator.ts) must give exactly the verdict of the
 * strict Schema decode for every message schema: on generated valid messages and on mutations of them (a member
 * dropped, added, nulled or retyped at any depth). If they ever disagree, the hot path would accept or refuse
 * what the contract does not.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Effect, Result, Schema } from "effect"
import { compileValidator } from "../../src/proto/internal/fastValidator.js"
import { Messages } from "../../src/proto/index.js"

const strict = { onExcessProperty: "error" } as const
const catalogues = { ...Messages.coreToRuntime, ...Messages.runtimeToCore }

/** Every object and array inside a value, with its path. */
const containers = (value: unknown, path: Array<string | number> = []): Array<{ node: unknown; path: Array<string | number> }> => {
  if (typeof value !== "object" || value === null) return []
  const here = [{ node: value, path }]
  const children = Array.isArray(value)
    ? value.flatMap((v, i) => containers(v, [...path, i]))
    : Object.entries(value).flatMap(([k, v]) => containers(v, [...path, k]))
  return [...here, ...children]
}

const clone = <A>(a: A): A => JSON.parse(JSON.stringify(a)) as A
const at = (root: unknown, path: ReadonlyArray<string | number>): unknown =>
  path.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], root)

/** Deterministic mutations of a message: for each container, drop / null / retype each member and add one. */
const mutations = (message: unknown): Array<unknown> => {
  const out: Array<unknown> = []
  for (const { node, path } of containers(message)) {
    if (Array.isArray(node)) {
      const pushed = clone(message)
      ;(at(pushed, path) as Array<unknown>).push({ unexpected: true })
      out.push(pushed)
      continue
    }
    const keys = Object.keys(node as object)
    for (const key of keys) {
      for (const replace of [undefined, null, 12.5, "x", true, []] as const) {
        const m = clone(message)
        const target = at(m, path) as Record<string, unknown>
        if (replace === undefined) delete target[key]
        else target[key] = replace
        out.push(m)
      }
    }
    const extra = clone(message)
    ;(at(extra, path) as Record<string, unknown>)["unexpected_member"] = 1
    out.push(extra)
  }
  return out
}

describe("fastValidator", () => {
  it("compiles an in-place validator for every message schema except ones with transformations", () => {
    const fallback = Object.entries(catalogues)
      .filter(([, d]) => compileValidator(d.schema.ast) === undefined)
      .map(([type]) => type)
    // only the error frame transforms (it normalizes code / http_status) and needs Schema's decoder
    assert.deepStrictEqual(fallback, ["error"])
  })

  for (const [type, d] of Object.entries(catalogues)) {
    const validate = compileValidator(d.schema.ast)
    if (validate === undefined) continue
    const decode = Schema.decodeUnknownResult(d.schema as Schema.Codec<unknown, unknown>, strict)

    it.effect(`agrees with the strict Schema decode on generated and mutated ${type} messages`, () =>
      Effect.gen(function* () {
        const samples = yield* Arbitrary.sampleEffect(Arbitrary.schema(d.schema as Schema.Codec<unknown, unknown>), {
          count: 12,
          seed: type,
          size: 6
        })
        let checked = 0
        for (const sample of samples) {
          const json = clone(sample) // what a peer would send: plain JSON
          assert.isTrue(Result.isSuccess(decode(json)), `${type}: generated sample must decode`)
          assert.isTrue(validate(json), `${type}: validator must accept a valid sample`)
          for (const mutated of mutations(json)) {
            const expected = Result.isSuccess(decode(mutated))
            if (validate(mutated) !== expected) {
              assert.fail(`${type}: validator says ${!expected} but Schema says ${expected} for ${JSON.stringify(mutated)}`)
            }
            checked++
          }
        }
        assert.isAbove(checked, 0)
      })
    )
  }
})
