/**
 * Reads `/proc/<pid>/stat` for the multinode suite (Linux only): a process's CPU, and the CPU of every process
 * whose `comm` is `postgres` (the local PostgreSQL cluster's postmaster, its background processes and backends).
 * On another OS, or when the server is not local, the readings are NaN / empty and the suite says so.
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { groupTicks, parseProcStat, type ProcStat, ticksToMicros } from "../lib/procStat.js"

const ticksPerSecond = (() => {
  try {
    const n = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim())
    return Number.isFinite(n) && n > 0 ? n : 100
  } catch {
    return 100
  }
})()

const readStat = (pid: number | string): ProcStat | undefined => {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return undefined
  }
}

/** A process's CPU so far (own, without its children), µs; NaN when it cannot be read. */
export const processCpuMicros = (pid: number): number => {
  const s = readStat(pid)
  return s === undefined ? Number.NaN : ticksToMicros(s.ownTicks, ticksPerSecond)
}

/** The local PostgreSQL server's processes (`comm` = `postgres`) now. */
export const postgresProcesses = (): Array<ProcStat> => {
  let pids: Array<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return []
  }
  const out: Array<ProcStat> = []
  for (const pid of pids) {
    const s = readStat(pid)
    if (s !== undefined && s.comm === "postgres") out.push(s)
  }
  return out
}

/** The PostgreSQL server's CPU so far (every `postgres` process plus its reaped children), µs; NaN when none is visible. */
export const postgresCpuMicros = (): { readonly micros: number; readonly processes: number } => {
  const all = postgresProcesses()
  return { micros: all.length === 0 ? Number.NaN : ticksToMicros(groupTicks(all), ticksPerSecond), processes: all.length }
}
