/**
 * Whether a process still runs, for tests that check no native process outlives its close: a zombie waiting
 * for a reaper runs nothing and counts as gone.
 */
import { processStat } from "../../src/runtime/harness/process/ProcessTable.js"

export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  const state = processStat(pid)?.state
  return state !== "Z" && state !== "X"
}
