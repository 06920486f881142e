/**
 * The machine a result was measured on, and how busy it was: each result names cores, CPU model, memory,
 * Node version and the load average at start and end (a shared machine makes absolute figures move; the
 * ratios against same-run baselines move much less).
 */
import { cpus, loadavg, release, totalmem, type } from "node:os"

export interface Machine {
  readonly cores: number
  readonly cpuModel: string
  readonly memoryGiB: number
  readonly node: string
  readonly os: string
  readonly loadAverage: ReadonlyArray<number>
}

export const machine = (): Machine => {
  const list = cpus()
  return {
    cores: list.length,
    cpuModel: list[0]?.model.trim() ?? "unknown",
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${type()} ${release()}`,
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100)
  }
}

export const describeMachine = (m: Machine): string =>
  `${m.cores} cores ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}, ${m.os}, load ${m.loadAverage.join(" / ")}`
