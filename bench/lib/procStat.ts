/**
 * CPU time of processes other than the bench's own children, from `/proc/<pid>/stat` (Linux): the multinode
 * suite reads it for the `agentwire core` processes and for the PostgreSQL server's processes. Pure parsing and
 * summing; the reading is in bench/support/procCpu.ts. Covered by test/bench/procStat.test.ts.
 */

export interface ProcStat {
  readonly pid: number
  /** The executable name (`comm`, at most 15 characters; a PostgreSQL backend keeps `postgres`). */
  readonly comm: string
  /** utime + stime: the process's own CPU, in clock ticks. */
  readonly ownTicks: number
  /** cutime + cstime: the CPU of its exited and reaped children, in clock ticks. */
  readonly childTicks: number
}

/**
 * Parses one `/proc/<pid>/stat` line; undefined when it is not one. `comm` may hold spaces and parentheses,
 * so the fields are counted from the last `)`: after it come state (field 3) … utime (14), stime (15),
 * cutime (16), cstime (17).
 */
export const parseProcStat = (text: string): ProcStat | undefined => {
  const open = text.indexOf("(")
  const close = text.lastIndexOf(")")
  if (open < 0 || close < open) return undefined
  const pid = Number(text.slice(0, open).trim())
  const fields = text.slice(close + 1).trim().split(/\s+/)
  // fields[0] is field 3 (state): field n is fields[n - 3].
  const at = (n: number) => Number(fields[n - 3])
  const [utime, stime, cutime, cstime] = [at(14), at(15), at(16), at(17)]
  if (!Number.isInteger(pid) || [utime, stime, cutime, cstime].some((x) => !Number.isFinite(x))) return undefined
  return { pid, comm: text.slice(open + 1, close), ownTicks: utime + stime, childTicks: cutime + cstime }
}

/**
 * The CPU (ticks) of a group of processes, counting the exited ones too: every member's own time plus the
 * time of its reaped children. A backend that exits between two samples moves its time from its own entry to
 * its parent's (the postmaster's) children time, so the difference of two sums stays the group's CPU.
 */
export const groupTicks = (stats: ReadonlyArray<ProcStat>): number =>
  stats.reduce((sum, s) => sum + s.ownTicks + s.childTicks, 0)

/** Ticks to microseconds at `ticksPerSecond` (`getconf CLK_TCK`, 100 on Linux). */
export const ticksToMicros = (ticks: number, ticksPerSecond: number): number => (ticks * 1e6) / ticksPerSecond
