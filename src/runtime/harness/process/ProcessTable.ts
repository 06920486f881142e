/**
 * Reads of the Linux process table (`/proc`) for process supervision: the state and group of a pid, the groups
 * a process's descendants run in, and which members of a set of groups are still running. A zombie (exited, not
 * yet reaped by its new parent) counts as gone: it runs nothing and holds no resource but its table entry.
 * Where `/proc` cannot be read, membership falls back to `kill(-pgid, 0)` (any member, zombie or not, counts).
 */
import { readdirSync, readFileSync } from "node:fs"

export interface ProcessStat {
  readonly state: string
  readonly ppid: number
  readonly pgrp: number
}

/** State, parent and process group of a pid from `/proc/<pid>/stat` (Linux), if readable. */
export const processStat = (pid: number): ProcessStat | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) state ppid pgrp …": comm may contain spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]) }
  } catch {
    return undefined
  }
}

const running = (stat: ProcessStat) => stat.state !== "Z" && stat.state !== "X"

/** Every readable, running process of the table, or undefined when `/proc` cannot be listed. */
const snapshot = (): Map<number, ProcessStat> | undefined => {
  let entries: Array<string>
  try {
    entries = readdirSync("/proc")
  } catch {
    return undefined
  }
  const table = new Map<number, ProcessStat>()
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const stat = processStat(Number(entry))
    if (stat !== undefined && running(stat)) table.set(Number(entry), stat)
  }
  return table
}

/**
 * The process groups of `root`'s running descendants (not `root`'s own group unless a descendant is in it).
 * A native CLI may start helpers in a new session (Codex runs its shell snapshot under `setsid`): signalling
 * the leader's group misses them, and once the leader exits they are reparented and no longer traceable, so
 * the groups are collected while the leader still runs.
 */
export const descendantGroups = (root: number): ReadonlySet<number> => {
  const groups = new Set<number>()
  const table = snapshot()
  if (table === undefined) return groups
  const children = new Map<number, Array<number>>()
  for (const [pid, stat] of table) {
    const list = children.get(stat.ppid)
    if (list === undefined) children.set(stat.ppid, [pid])
    else list.push(pid)
  }
  // Iterative walk: the table is bounded by the machine, never by peer data, but no recursion is needed.
  const pending = [...(children.get(root) ?? [])]
  const seen = new Set<number>()
  while (pending.length > 0) {
    const pid = pending.pop()!
    if (seen.has(pid)) continue
    seen.add(pid)
    groups.add(table.get(pid)!.pgrp)
    pending.push(...(children.get(pid) ?? []))
  }
  return groups
}

/** The running members of the given process groups (pids); empty when every group is gone. */
export const groupMembers = (groups: ReadonlySet<number>): Array<number> => {
  const table = snapshot()
  if (table === undefined) {
    return [...groups].filter((pgid) => {
      try {
        process.kill(-pgid, 0)
        return true
      } catch {
        return false
      }
    })
  }
  const members: Array<number> = []
  for (const [pid, stat] of table) if (groups.has(stat.pgrp)) members.push(pid)
  return members
}

/** Is any process of group `pgid` still running? */
export const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch {
    return false
  }
  return groupMembers(new Set([pgid])).length > 0
}
