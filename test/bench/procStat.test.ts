/**
 * The multinode suite's `/proc/<pid>/stat` parsing and CPU summing (bench/lib/procStat.ts). Pure: fixed lines,
 * no process is read.
 */
import { assert, describe, it } from "@effect/vitest"
import { groupTicks, parseProcStat, ticksToMicros } from "../../bench/lib/procStat.js"

// Fields after comm: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
const line = (pid: number, comm: string, utime: number, stime: number, cutime: number, cstime: number) =>
  `${pid} (${comm}) S 1 ${pid} ${pid} 0 -1 4194560 120 0 0 0 ${utime} ${stime} ${cutime} ${cstime} 20 0 1 0 5000 1000000 500`

describe("procStat", () => {
  it("reads utime + stime and cutime + cstime", () => {
    assert.deepStrictEqual(parseProcStat(line(2208, "postgres", 30, 12, 400, 100)), {
      pid: 2208,
      comm: "postgres",
      ownTicks: 42,
      childTicks: 500
    })
  })

  it("counts the fields from the last parenthesis, so a comm with spaces and parentheses is read right", () => {
    const s = parseProcStat(line(77, "a) b (c", 5, 6, 7, 8))
    assert.deepStrictEqual(s, { pid: 77, comm: "a) b (c", ownTicks: 11, childTicks: 15 })
  })

  it("rejects what is not a stat line", () => {
    assert.isUndefined(parseProcStat(""))
    assert.isUndefined(parseProcStat("12 (short) S 1 2"))
    assert.isUndefined(parseProcStat("x (postgres) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4"))
  })

  it("keeps a group's CPU when a member exits and its time moves to the parent's children time", () => {
    const before = [line(1, "postgres", 100, 50, 0, 0), line(2, "postgres", 30, 10, 0, 0)].map((l) => parseProcStat(l)!)
    // Backend 2 ran 5 more ticks, exited and was reaped by the postmaster (pid 1): 45 ticks now in its cutime/cstime.
    const after = [line(1, "postgres", 101, 50, 35, 10)].map((l) => parseProcStat(l)!)
    assert.strictEqual(groupTicks(after) - groupTicks(before), 6)
  })

  it("converts ticks to microseconds", () => {
    assert.strictEqual(ticksToMicros(3, 100), 30_000)
    assert.strictEqual(ticksToMicros(250, 250), 1_000_000)
  })
})
