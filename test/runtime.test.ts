import { assert, describe, it } from "@effect/vitest"

describe("Node runtime", () => {
  it("runs on the pinned Node (>= 22.19), not the machine's Node 20", () => {
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
    assert.isTrue(major > 22 || (major === 22 && minor >= 19), `running on ${process.versions.node}`)
  })
})
