/**
 * A schedule: the list of steps the simulator executes, generated up front from the seed. Steps are intentions
 * resolved when they run ("answer the first pending interaction of the 3rd Turn"): a step whose target does not
 * exist (yet) does nothing, so any subset of a plan is itself a valid plan — which is what lets a failing schedule
 * be minimized by dropping steps.
 */
import type { InstallFault } from "./MemoryWorkspace.js"
import type { Prng } from "./Prng.js"

export type FaultKind =
  | "drop"
  | "drop_at_frame"
  | "delay"
  | "reconnect_storm"
  | "core_restart"
  | "runtime_sigterm"
  | "device_shutdown"
  | "clock_jump"
  | "harness_close_fails"
  | "harness_close_hangs"
  | "harness_cancel_never_settles"
  | "harness_write_hangs"
  | "harness_prepare_residue"
  | "workspace_install_fails"
  | "workspace_install_hangs"
  | "workspace_install_unconfirmed"

export const faultKinds: ReadonlyArray<FaultKind> = [
  "drop",
  "drop_at_frame",
  "delay",
  "reconnect_storm",
  "core_restart",
  "runtime_sigterm",
  "device_shutdown",
  "clock_jump",
  "harness_close_fails",
  "harness_close_hangs",
  "harness_cancel_never_settles",
  "harness_write_hangs",
  "harness_prepare_residue",
  "workspace_install_fails",
  "workspace_install_hangs",
  "workspace_install_unconfirmed"
]

/** A file of a workspace step: its relative path, size and install fault (bytes are a function of path and size). */
export interface PlannedFile {
  readonly path: string
  readonly size: number
  readonly fault?: InstallFault
}

export type Step =
  | {
    readonly k: "session"
    readonly options: Record<string, unknown>
    /** Bound to the device's Environment (`self_hosted`), with these initialization files (`runtime_prepare`). */
    readonly workspace?: { readonly init: ReadonlyArray<PlannedFile> }
  }
  /** An operator file write on the n-th self_hosted Session (`Files.write`). */
  | { readonly k: "write"; readonly session: number; readonly file: PlannedFile }
  /** An operator file read on the n-th self_hosted Session (`Files.read`). */
  | { readonly k: "read"; readonly session: number; readonly path: string }
  /** The operator settles the n-th self_hosted Session's write left `unknown`, as the workspace shows it. */
  | { readonly k: "settle"; readonly session: number }
  | { readonly k: "turn"; readonly session: number; readonly script: ReadonlyArray<unknown> }
  | { readonly k: "steer"; readonly turn: number }
  | { readonly k: "cancel"; readonly turn: number }
  | { readonly k: "answer"; readonly turn: number; readonly approve: boolean }
  | { readonly k: "signal"; readonly name: string }
  | { readonly k: "advance"; readonly ms: number }
  | { readonly k: "drop" }
  | { readonly k: "drop_at_frame"; readonly n: number; readonly deliver: boolean }
  | { readonly k: "delay"; readonly direction: "toCore" | "toRuntime"; readonly ms: number }
  | { readonly k: "reconnect_storm"; readonly drops: number }
  | { readonly k: "core_restart" }
  | { readonly k: "runtime_sigterm" }
  | { readonly k: "device_shutdown" }

/** The budgets the clock jumps straddle: 10 s, 30 s, 5 s, 15 s and the 5-minute expiry, each ±1 ms. */
export const budgetsMs: ReadonlyArray<number> = [10_000, 30_000, 5_000, 15_000, 300_000]

export interface Workload {
  readonly steps: ReadonlyArray<Step>
  /** Harness fault kinds the generated scripts and session options carry (counted once per occurrence). */
  readonly harnessFaults: ReadonlyArray<FaultKind>
}

export const describe = (step: Step): string => {
  switch (step.k) {
    case "session":
      return `create session options=${JSON.stringify(step.options)}${step.workspace === undefined ? "" : ` self_hosted init=${JSON.stringify(step.workspace.init)}`}`
    case "write":
      return `write ${JSON.stringify(step.file)} on self_hosted session#${step.session}`
    case "read":
      return `read ${step.path} on self_hosted session#${step.session}`
    case "settle":
      return `settle unknown write of self_hosted session#${step.session}`
    case "turn":
      return `start turn on session#${step.session} script=${JSON.stringify(step.script)}`
    case "steer":
    case "cancel":
      return `${step.k} turn#${step.turn}`
    case "answer":
      return `answer turn#${step.turn} approve=${step.approve}`
    case "signal":
      return `fire signal ${step.name}`
    case "advance":
      return `advance clock ${step.ms} ms`
    case "drop_at_frame":
      return `drop connection at frame +${step.n} (${step.deliver ? "delivered" : "lost"})`
    case "delay":
      return `delay ${step.direction} for ${step.ms} ms`
    case "reconnect_storm":
      return `reconnect storm x${step.drops}`
    default:
      return step.k.replace(/_/g, " ")
  }
}

const signalNames = ["s1", "s2", "s3"]

/** A harness fault setting for the Turn (placed first, so it applies to what follows). */
const faultSetting = (rng: Prng, faults: Array<FaultKind>): unknown => {
  const r = rng.int(9)
  if (r < 2) {
    faults.push("harness_close_fails")
    return { close_fails: rng.between(1, 3) }
  }
  if (r < 3) {
    faults.push("harness_close_hangs")
    return { close_hangs: 1 }
  }
  if (r < 6) {
    faults.push("harness_cancel_never_settles")
    return { cancel_ignored: true }
  }
  if (r < 7) return { cancel_settles_on: rng.pick(signalNames) }
  if (r < 8) return { fail_submissions: 1 }
  return { reusable: false }
}

/** One generated event step of a Turn's body. */
const bodyStep = (rng: Prng): unknown => {
  const r = rng.int(100)
  if (r < 35) return { delta: rng.pick(["hello ", "wörld ", "🙂 ", "\u2028x", "line\n"]) }
  if (r < 45) return { thinking: "hmm" }
  if (r < 60) return { tool_call: { name: "shell", args: { cmd: "ls" }, result: { ok: true } } }
  if (r < 70) return { usage: { input_tokens: rng.int(100), output_tokens: rng.int(100) } }
  if (r < 92) return { sleep: rng.pick([100, 1_000, 4_999, 5_001]) }
  return { error: { message: "engine failed", code: "server_error" } }
}

/** What keeps a Turn running (so steers, answers and cancels meet a live Run), and the fault it injects. */
const tailStep = (rng: Prng, faults: Array<FaultKind>): unknown => {
  const r = rng.int(100)
  if (r < 10) return { hang: true }
  if (r < 20) return { sleep: rng.pick([12_000, 20_000, 40_000]) }
  if (r < 38) {
    const write = rng.pick(["ok", "ok", "hang", "reject"] as const)
    if (write === "hang") faults.push("harness_write_hangs")
    return {
      await_steer: 1,
      write,
      ...(write === "hang" ? { write_returns_on: rng.pick(signalNames) } : {}),
      accept: rng.pick(["ok", "ok", "never", "reject", "unknown"] as const)
    }
  }
  if (r < 58) return { permission: { tool: "shell", title: "run a command", withdraw_after: rng.pick([3_000, 60_000]) } }
  if (r < 75) return { ask: { questions: [{ id: "q1", question: "which?", options: [{ label: "a" }, { label: "b" }] }] } }
  if (r < 95) return { function_call: { name: "lookup", arguments: { q: "x" } } }
  return { wait: rng.pick(signalNames) }
}

/** A Turn's script: fault settings, a body of events, and usually something that keeps it running. */
const script = (rng: Prng, faults: Array<FaultKind>): Array<unknown> => {
  const steps: Array<unknown> = []
  const settings = rng.pick([0, 0, 1, 1, 2])
  for (let i = 0; i < settings; i++) steps.push(faultSetting(rng, faults))
  const body = rng.between(0, 3)
  for (let i = 0; i < body; i++) steps.push(bodyStep(rng))
  if (rng.chance(0.7)) steps.push(tailStep(rng, faults))
  if (rng.chance(0.3)) steps.push(bodyStep(rng))
  return steps
}

const sessionOptions = (rng: Prng, faults: Array<FaultKind>): Record<string, unknown> => {
  const r = rng.int(10)
  if (r === 0) {
    faults.push("harness_prepare_residue")
    return { prepare: "fail_with_residue" }
  }
  if (r === 1) {
    faults.push("harness_close_fails")
    return { close_fails: rng.between(1, 2) }
  }
  if (r === 2) return { prepare_sleep: rng.pick([500, 6_000]) }
  return {}
}

/** Write sizes from empty to 200 KiB (several 64 KiB chunks). */
const writeSizes = [0, 1, 100, 65_536, 65_537, 150_000, 204_800]

const installFault = (rng: Prng, faults: Array<FaultKind>, p: number): InstallFault | undefined => {
  if (!rng.chance(p)) return undefined
  const fault = rng.pick(["install_fails", "install_hangs", "install_unconfirmed"] as const)
  faults.push(`workspace_${fault}`)
  return fault
}

export interface PlanOptions {
  readonly steps: number
  /** Probability that a step is a fault rather than workload or time. */
  readonly faultRate?: number
}

/** Generates a schedule from `rng`. */
export const generate = (rng: Prng, options: PlanOptions): Workload => {
  const steps: Array<Step> = []
  const faults: Array<FaultKind> = []
  // Each schedule has its own fault intensity: calm ones let Turns reach their interesting states.
  const faultRate = options.faultRate ?? rng.pick([0.05, 0.1, 0.2, 0.3])
  let sessions = 0
  let turns = 0
  let hosted = 0
  const paths: Array<string> = []
  /** Mostly one of the last three Turns (the ones likely still running). */
  const recent = (n: number) => Math.max(0, n - 1 - rng.int(Math.min(n, 3)))
  const newSession = () => {
    const options = sessionOptions(rng, faults)
    if (rng.chance(0.5)) {
      const init: Array<PlannedFile> = []
      const files = rng.pick([0, 0, 1, 2])
      for (let i = 0; i < files; i++) {
        const fault = installFault(rng, faults, 0.15)
        init.push({ path: `init/s${sessions + 1}-${i + 1}.txt`, size: rng.pick([0, 10, 70_000]), ...(fault === undefined ? {} : { fault }) })
      }
      steps.push({ k: "session", options, workspace: { init } })
      hosted++
    } else steps.push({ k: "session", options })
    sessions++
  }
  newSession()
  if (rng.chance(0.5)) newSession()
  while (steps.length < options.steps) {
    const r = rng.next()
    if (r < faultRate) {
      const f = rng.int(100)
      if (f < 25) steps.push({ k: "drop" })
      else if (f < 40) steps.push({ k: "drop_at_frame", n: rng.between(1, 8), deliver: rng.chance(0.5) })
      else if (f < 55) steps.push({ k: "delay", direction: rng.pick(["toCore", "toRuntime"] as const), ms: rng.pick([50, 900, 5_000, 11_000]) })
      else if (f < 63) steps.push({ k: "reconnect_storm", drops: rng.between(2, 5) })
      else if (f < 73) steps.push({ k: "core_restart" })
      else if (f < 83) steps.push({ k: "runtime_sigterm" })
      else if (f < 88) steps.push({ k: "device_shutdown" })
      else {
        const budget = rng.pick(budgetsMs)
        steps.push({ k: "advance", ms: budget + rng.pick([-1, 0, 1]) })
      }
      continue
    }
    const w = rng.int(100)
    if (w < 22 || turns === 0) {
      steps.push({ k: "turn", session: rng.int(sessions), script: script(rng, faults) })
      turns++
    } else if (w < 32) steps.push({ k: "steer", turn: recent(turns) })
    else if (w < 38) steps.push({ k: "cancel", turn: recent(turns) })
    else if (w < 56) steps.push({ k: "answer", turn: recent(turns), approve: rng.chance(0.7) })
    else if (w < 57) steps.push({ k: "signal", name: rng.pick(signalNames) })
    else if (w < 59 && sessions < 4) newSession()
    else if (w < 69 && hosted > 0) {
      const fault = installFault(rng, faults, 0.3)
      const path = rng.chance(0.2) ? `dir/w${steps.length}.bin` : `w${steps.length}.bin`
      paths.push(path)
      steps.push({ k: "write", session: rng.int(hosted), file: { path, size: rng.pick(writeSizes), ...(fault === undefined ? {} : { fault }) } })
      // A Core restart while the install hangs: the reservation is `committing` (the commit may have been sent).
      if (fault === "install_hangs" && rng.chance(0.6)) steps.push({ k: "advance", ms: 100 }, { k: "core_restart" })
    } else if (w < 73 && hosted > 0) {
      steps.push({ k: "read", session: rng.int(hosted), path: paths.length > 0 && rng.chance(0.8) ? rng.pick(paths) : "missing.bin" })
    } else if (w < 75 && hosted > 0) steps.push({ k: "settle", session: rng.int(hosted) })
    else steps.push({ k: "advance", ms: rng.pick([1, 10, 100, 500, 1_000, 2_500, 5_000]) })
  }
  return { steps, harnessFaults: faults }
}

export const allSignals = signalNames
