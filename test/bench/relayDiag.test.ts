/**
 * The `runtime-peer` child's diagnostic switch (bench/children/relayDiag.ts): off unless `BENCH_RELAY_DIAG` names a
 * file; on, one JSON line per call with what the process did since the previous one (socket writes counted through
 * `net.Socket`). Counts only, no timing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import { Socket } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { relayDiag } from "../../bench/children/relayDiag.js"

describe("relayDiag", () => {
  it("is a no-op that patches nothing when the switch is unset", () => {
    const before = Socket.prototype.write
    const saved = process.env["BENCH_RELAY_DIAG"]
    delete process.env["BENCH_RELAY_DIAG"]
    try {
      relayDiag(() => "daemon")()
      assert.strictEqual(Socket.prototype.write, before)
    } finally {
      if (saved !== undefined) process.env["BENCH_RELAY_DIAG"] = saved
    }
  })

  it("writes one line per call with the socket writes since the previous call", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "relay-diag-"))
    const file = Path.join(dir, "diag.jsonl")
    const saved = process.env["BENCH_RELAY_DIAG"]
    process.env["BENCH_RELAY_DIAG"] = file
    const before = Socket.prototype.write
    const proto = Socket.prototype as unknown as Record<string, unknown>
    const writeGeneric = proto["_writeGeneric"]
    try {
      const diag = relayDiag(() => "daemon")
      // A socket that is never connected: its writes are counted at `write`, then fail (no handle).
      const socket = new Socket()
      socket.on("error", () => {})
      socket.write("abc")
      socket.write(new Uint8Array(5))
      diag()
      diag()
      const lines = Fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
      assert.strictEqual(lines.length, 2)
      assert.deepStrictEqual(
        lines.map((l) => [l["role"], l["n"], l["writes"], l["writeBytes"]]),
        [["daemon", 0, 2, 8], ["daemon", 1, 0, 0]]
      )
      for (const key of ["userUs", "sysUs", "mainUs", "minflt", "gcMinor", "gcMajor", "heapUsedMB"]) {
        assert.strictEqual(typeof lines[0]![key], "number", key)
      }
      socket.destroy()
    } finally {
      Socket.prototype.write = before
      proto["_writeGeneric"] = writeGeneric
      if (saved === undefined) delete process.env["BENCH_RELAY_DIAG"]
      else process.env["BENCH_RELAY_DIAG"] = saved
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
