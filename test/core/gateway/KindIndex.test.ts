/**
 * The gateway's kind index (issue 18): entries by the kinds their latest declaration advertises, in the order
 * they began advertising, with the count of declared entries; a changed declaration moves an entry, an
 * unchanged one keeps its place, a removed entry leaves every kind.
 */
import { assert, describe, it } from "@effect/vitest"
import * as KindIndex from "../../../src/core/KindIndex.js"

describe("KindIndex", () => {
  it("lists the entries advertising a kind in the order they began advertising it", () => {
    const index = KindIndex.make<string>()
    index.declare("a", ["codex"])
    index.declare("b", ["scripted", "codex"])
    index.declare("c", ["scripted"])
    assert.deepStrictEqual([...index.advertising("codex")], ["a", "b"])
    assert.deepStrictEqual([...index.advertising("scripted")], ["b", "c"])
    assert.deepStrictEqual([...index.advertising("claude")], [])
    assert.strictEqual(index.declared(), 3)
    // The same declaration again keeps the place; a changed one moves the entry to the end of its kinds.
    index.declare("b", ["codex", "scripted"])
    assert.deepStrictEqual([...index.advertising("scripted")], ["b", "c"])
    index.declare("b", ["scripted"])
    assert.deepStrictEqual([...index.advertising("codex")], ["a"])
    assert.deepStrictEqual([...index.advertising("scripted")], ["c", "b"])
  })

  it("forgets a removed entry under every kind, once; a declaration without kinds still counts as declared", () => {
    const index = KindIndex.make<string>()
    index.declare("a", ["codex", "scripted"])
    index.declare("b", [])
    assert.strictEqual(index.declared(), 2)
    index.remove("a")
    index.remove("a")
    assert.deepStrictEqual([...index.advertising("codex")], [])
    assert.deepStrictEqual([...index.advertising("scripted")], [])
    assert.strictEqual(index.declared(), 1)
    index.remove("b")
    assert.strictEqual(index.declared(), 0)
  })
})
