import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Messages } from "../../src/proto/index.js"
import type { Handlers } from "../../src/runtime/Dispatcher.js"

describe("Dispatcher", () => {
  it("the handler table is exhaustive over Core → Runtime types (a missing one fails to compile)", () => {
    const noop = () => Effect.void
    const all = Object.fromEntries(Object.keys(Messages.coreToRuntime).map((k) => [k, noop])) as unknown as Handlers
    // @ts-expect-error - a table without `prompt_steer` is not a Handlers value
    const incomplete: Handlers = { ...all, prompt_steer: undefined }
    void incomplete
    const { prompt_steer: _omitted, ...partial } = all
    // @ts-expect-error - and neither is one missing the key entirely
    const missing: Handlers = partial
    void missing
    assert.deepStrictEqual(Object.keys(all).sort(), Object.keys(Messages.coreToRuntime).sort())
  })
})
