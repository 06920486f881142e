/**
 * Workspace suite (issue #13): `workspace_write` and `workspace_export` over loopback, in one process — the real
 * gateway (`GatewayServer` on 127.0.0.1) with Core's `WorkspaceWrite` / `WorkspaceExport` drivers, and the real
 * daemon (`Daemon.run`, production Connector) bound to a temporary workspace. Baseline: raw `ws` doing the same
 * work with the same 64 KiB frame pattern and the same request / receipt discipline (`workspaceRaw.ts`).
 *
 * - Throughput is judged on **CPU per byte**: each round runs the daemon path, the raw baseline and the negative
 *   control (raw `ws` moving and processing every chunk three times) in rotating order, and divides the bytes by the
 *   process's CPU time (user + system) over that transfer (MB per CPU-second). Target: ≥ 60 % of raw `ws` on the
 *   median of the paired per-round ratios. Wall-clock MB/s is reported beside it, not judged.
 * - Memory: RSS sampled every 1 MiB while the daemon exports a 500 MiB workspace (32 MiB with `--quick`); judged
 *   on the growth over the RSS before the export (< 100 MiB) and on the growth over the second half (< 16 MiB:
 *   flat). Negative control: the same export with a consumer that keeps every chunk.
 *
 * The trees are created in the bound temporary workspace and removed with it.
 * The suite runs in a child process of its own (support/isolatedSuite.ts; `BENCH_ISOLATE=0`: in the bench process),
 * so its CPU per byte does not depend on the V8 heap state earlier suites leave (docs/performance.md, "wsorder").
 */
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { constants, PerformanceObserver } from "node:perf_hooks"
import { getHeapSpaceStatistics } from "node:v8"
import { Effect, Queue, Stream } from "effect"
import type { DeviceSession } from "../../src/core/DeviceSession.js"
import * as WorkspaceExport from "../../src/core/workspace/WorkspaceExport.js"
import * as WorkspaceWrite from "../../src/core/workspace/WorkspaceWrite.js"
import { Ids } from "../../src/proto/index.js"
import { figure, type Figure } from "../lib/figures.js"
import { percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { type Core, makeDevices, sessionOf, startCore, watchDeclared } from "../support/core.js"
import { startInProcessDaemon } from "../support/inProcessDaemon.js"
import { MiB, type RssSample, rssGrowth } from "./workspaceMemory.js"
import { type RawWorkspace, startRawWorkspace } from "./workspaceRaw.js"

const EnvironmentId = "b3e5a7c9-2d4f-4e6a-8b0c-1d2e3f4a5b6c"
const SessionId = "6a1d3e9f-0b52-4c48-9f7e-2d3e4f5a6b7c"

/** The process's CPU seconds (user + system) and the wall seconds of one measured transfer. */
interface Cost {
  readonly cpu: number
  readonly wall: number
  /** The user and system parts of `cpu` (logged per round: disk work shows in the system part). */
  readonly user: number
  readonly system: number
  /** Minor page faults of the process over the transfer (logged per round). */
  readonly faults: number
}

const startCost = () => {
  const cpu0 = process.cpuUsage()
  const faults0 = process.resourceUsage().minorPageFault
  const t0 = performance.now()
  return (): Cost => {
    const wall = (performance.now() - t0) / 1000
    const cpu = process.cpuUsage(cpu0)
    const faults = process.resourceUsage().minorPageFault - faults0
    return { cpu: (cpu.user + cpu.system) / 1e6, wall, user: cpu.user / 1e6, system: cpu.system / 1e6, faults }
  }
}

/** Measures `f` (a Promise). */
const measured = async (f: () => Promise<unknown>): Promise<Cost> => {
  const stop = startCost()
  await f()
  return stop()
}

/** Measures `effect` (inside a larger Effect, so setup around it stays outside the measured time). */
const measuredEffect = <E>(effect: Effect.Effect<unknown, E>): Effect.Effect<Cost, E> =>
  Effect.suspend(() => {
    const stop = startCost()
    return Effect.map(effect, () => stop())
  })

/** Deterministic, poorly compressible file content. */
const content = (size: number, seed: number): Buffer => {
  const b = Buffer.allocUnsafe(size)
  let x = (seed * 2654435761) >>> 0 || 1
  for (let i = 0; i < size; i += 4) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    b.writeUInt32LE(x >>> 0, Math.min(i, size - 4))
  }
  return b
}

/** `files` files of `fileSize` bytes below `dir`, in a few subdirectories. */
const makeTree = (dir: string, files: number, fileSize: number) => {
  const data = content(fileSize, files)
  for (let i = 0; i < files; i++) {
    const sub = join(dir, `d${i % 8}`)
    mkdirSync(sub, { recursive: true })
    data.writeUInt32LE(i, 0) // every file differs
    writeFileSync(join(sub, `f${String(i).padStart(4, "0")}.bin`), data)
  }
}

let preparations = 0

/**
 * Runs `use` with a ready read-only preparation (reference §7.1) of the bound Environment, then releases it and
 * waits for `released` (a write is refused while any Executor exists).
 */
const withReadOnly = <A, E>(session: DeviceSession, root: string, use: (handle: Ids.AdmissionHandle) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const id = Ids.unsafeMake.preparationRequestId(`bench-ro-${process.pid}-${++preparations}`)
    const queue = yield* Stream.toQueue(yield* session.subscribePreparation(id), { capacity: "unbounded" })
    yield* session.send({
      type: "execution_prepare",
      id,
      payload: {
        session_id: Ids.unsafeMake.sessionId(SessionId),
        configuration: {
          agent_kind: "scripted",
          conversation_id: "",
          run_id: "",
          local_environment: { id: EnvironmentId, workspace_directory: root, capability_sources: null },
          workspace_read_only: true,
          agent_state_key: `agents-api-${SessionId}`,
          release_on_completion: true,
          strict_resume: true
        }
      }
    })
    // Each status within 30 s (a missing `ready` or `released` fails the run with its reason instead of hanging it).
    const take = (waitingFor: string) =>
      Queue.take(queue).pipe(
        Effect.timeoutOrElse({
          duration: "30 seconds",
          orElse: () => Effect.die(new Error(`read-only preparation: no ${waitingFor} status within 30 s`))
        })
      )
    let status = yield* take("ready")
    while (status.state === "preparing") status = yield* take("ready")
    const handle = status.handle
    if (status.state !== "ready" || handle === undefined) return yield* Effect.die(new Error(`read-only preparation ${status.state} (${status.error_code ?? "no code"})`))
    const release = session.send({ type: "execution_release", id, payload: { handle } })
    let releasing = false
    // A failed `use` (an export ended at its budget) still releases the handle, without waiting for `released`.
    yield* Effect.addFinalizer(() => (releasing ? Effect.void : Effect.ignore(release)))
    const result = yield* use(handle)
    releasing = true
    yield* release
    while (status.state !== "released") status = yield* take("released")
    return result
  }))

/**
 * One export through the daemon; `onChunk` sees every chunk (after the driver validated it). The cost covers
 * the export alone (not the read-only preparation around it).
 */
const daemonExport = (core: Core, session: DeviceSession, root: string, onChunk: (bytes: Uint8Array) => void) =>
  core.runtime.runPromise(withReadOnly(session, root, (handle) =>
    measuredEffect(WorkspaceExport.exportTo(
      session,
      { operationId: Ids.unsafeMake.operationId(randomUUID()), handle, environmentId: EnvironmentId },
      (bytes) => Effect.sync(() => onChunk(bytes))
    ))))

const daemonWrite = (core: Core, session: DeviceSession, path: string, body: Uint8Array) =>
  core.runtime.runPromise(WorkspaceWrite.write(session, {
    operationId: Ids.unsafeMake.operationId(randomUUID()),
    environmentId: EnvironmentId,
    sessionId: SessionId,
    path,
    body
  }))

interface Contender {
  readonly name: string
  /** Runs once; returns the bytes moved and the cost of moving them. */
  readonly run: () => Promise<{ readonly bytes: number; readonly cost: Cost }>
}

/** Paired rounds in rotating order; per contender the MB per CPU-second and the wall MB/s of each round. */
const rounds = async (ctx: SuiteContext, label: string, contenders: ReadonlyArray<Contender>, n: number) => {
  const perCpu: Record<string, Array<number>> = {}
  const perWall: Record<string, Array<number>> = {}
  for (const c of contenders) {
    perCpu[c.name] = []
    perWall[c.name] = []
    await c.run() // warm-up, not counted
  }
  // Logged per transfer (docs/performance.md, "wsorder"): the process's minor page faults, V8's young-generation
  // size before it and its collections by kind (a mark-compact per young collection marks the slow heap state).
  const gcs: Array<{ readonly minor: boolean; readonly ms: number }> = []
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcs.push({ minor: (e as { readonly detail?: { readonly kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR, ms: e.duration })
    }
  })
  observer.observe({ entryTypes: ["gc"] })
  const gcSummary = (minor: boolean) => {
    const xs = gcs.filter((g) => g.minor === minor)
    return `${xs.length}/${xs.reduce((a, g) => a + g.ms, 0).toFixed(0)} ms`
  }
  for (let r = 0; r < n; r++) {
    const split: Record<string, string> = {}
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(r + k) % contenders.length]!
      gcs.length = 0
      const young = getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.space_size ?? Number.NaN
      const { bytes, cost: { cpu, wall, user, system, faults } } = await c.run()
      await new Promise((resolve) => setImmediate(resolve)) // the transfer's gc entries are delivered
      perCpu[c.name]!.push(bytes / 1e6 / cpu)
      perWall[c.name]!.push(bytes / 1e6 / wall)
      split[c.name] = `user ${(user * 1000).toFixed(0)} + sys ${(system * 1000).toFixed(0)} ms, ${faults} faults, ` +
        `young ${(young / 2 ** 20).toFixed(0)} MiB, gc minor ${gcSummary(true)} major ${gcSummary(false)}`
    }
    ctx.log(`${label} round ${r + 1}/${n}: ` + contenders.map((c) => `${c.name} ${perCpu[c.name]!.at(-1)!.toFixed(1)} MB/CPU-s (${split[c.name]})`).join(", "))
  }
  observer.disconnect()
  return { perCpu, perWall }
}

type Measured = Awaited<ReturnType<typeof rounds>>

const rawExport = async (f: () => Promise<number>) => {
  const stop = startCost()
  const bytes = await f()
  return { bytes, cost: stop() }
}

/** Streamed exports judged for RSS (growth on every one, flatness on the median). */
const StreamedRssExports = 3

/** RSS growth of one daemon export of the whole workspace (`total` bytes of file data); `keep` retains chunks. */
const exportRss = async (ctx: SuiteContext, core: Core, session: DeviceSession, root: string, total: number, keep: boolean) => {
  const kept: Array<Uint8Array> = []
  const t0 = performance.now()
  let nextLog = 100 * MiB
  const samples: Array<RssSample> = []
  let received = 0
  let nextSample = 0
  const before = process.memoryUsage.rss()
  const exported = daemonExport(core, session, root, (bytes) => {
    received += bytes.length
    if (keep) kept.push(bytes)
    if (received >= nextSample) {
      samples.push({ at: Math.min(received, total), rss: process.memoryUsage.rss() })
      nextSample = received + MiB
    }
    if (received >= nextLog) {
      ctx.log(`rss: ${Math.round(received / MiB)} MiB exported in ${((performance.now() - t0) / 1000).toFixed(0)} s`)
      nextLog += 100 * MiB
    }
  })
  // An export that ends early (the Runtime's 180 s budget on a loaded machine) is judged over what it exported.
  const failure = await exported.then(() => undefined, (e: unknown) => (e instanceof Error ? e.message : String(e)))
  const end = failure === undefined ? total : received
  samples.push({ at: end, rss: process.memoryUsage.rss() })
  const growth = rssGrowth(before, samples, end)
  kept.length = 0
  if (failure !== undefined) ctx.log(`rss: the export ended after ${Math.round(received / MiB)} MiB: ${failure}`)
  return { ...growth, completed: failure === undefined, exported: received }
}

export const workspaceSuite: Suite = {
  name: "workspace",
  describe: "workspace_write / workspace_export over loopback (gateway ⇄ daemon) vs raw ws, CPU per byte; RSS exporting 500 MiB",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const n = ctx.quick ? 2 : 9
    const writeSize = (ctx.quick ? 8 : 32) * MiB
    const exportFiles = ctx.quick ? 16 : 64
    const exportFileSize = 512 * 1024
    const rssFiles = ctx.quick ? 8 : 100
    const rssFileSize = (ctx.quick ? 4 : 5) * MiB
    const workspace = realpathSync(mkdtempSync(join(tmpdir(), "agentwire-bench-workspace-")))
    const rawDir = realpathSync(mkdtempSync(join(tmpdir(), "agentwire-bench-workspace-raw-")))
    const [device] = makeDevices("bench-workspace", 1)
    const core = await startCore([device!])
    const declared = watchDeclared(core, device!.deviceId)
    await declared.ready
    const daemon = startInProcessDaemon(core, device!, EnvironmentId, workspace)
    let raw: RawWorkspace | undefined
    try {
      await declared.declared
      const session = await sessionOf(core, device!.deviceId)
      raw = await startRawWorkspace(rawDir, workspace)
      const r = raw
      const figures: Array<Figure> = []
      const throughput = (family: string, size: string, m: Measured) => {
        figures.push(figure({
          suite: "workspace",
          name: `${family}, ${size}, receipt per 64 KiB: bytes per CPU-second`,
          unit: "MB/CPU-s",
          samples: m.perCpu["daemon"]!,
          baseline: { name: "raw ws, same frames, receipts and disk work", samples: m.perCpu["raw"]! },
          target: { on: "ratio", op: ">=", value: 0.6 },
          control: { name: "raw ws, every chunk moved and processed three times", samples: m.perCpu["control"]! }
        }))
        figures.push(figure({
          suite: "workspace",
          name: `${family}, ${size}: wall-clock throughput`,
          unit: "MB/s",
          samples: m.perWall["daemon"]!,
          baseline: { name: "raw ws, same frames, receipts and disk work", samples: m.perWall["raw"]! }
        }))
      }

      // Writes: the same body to the same destination, replaced atomically each time.
      const body = content(writeSize, 1)
      const parts = process.env["BENCH_WORKSPACE_PARTS"]
      const writeContenders: Array<Contender> = [
        { name: "daemon", run: async () => ({ bytes: body.length, cost: await measured(() => daemonWrite(core, session, "bench/write.bin", body)) }) },
        { name: "raw", run: async () => ({ bytes: body.length, cost: await measured(() => r.write("bench/write.bin", body, 1)) }) },
        { name: "control", run: async () => ({ bytes: body.length, cost: await measured(() => r.write("bench/write.bin", body, 3)) }) }
      ]
      // Profiling aid (not a figure): `BENCH_WORKSPACE_PARTS=write-daemon` (or `write-raw`) runs 20 writes of that
      // contender alone and stops, so a CPU profile holds one path.
      const alone = writeContenders.find((c) => parts === `write-${c.name}`)
      if (alone !== undefined) {
        const only = await rounds(ctx, "write", [alone], 20)
        ctx.log(`${alone.name} write alone: median ${percentile(only.perCpu[alone.name]!, 50).toFixed(1)} MB/CPU-s`)
        return { figures: [], notes: [`workspace: profiling run (BENCH_WORKSPACE_PARTS=${parts}), no figures`] }
      }
      const writes = await rounds(ctx, "write", writeContenders, n)
      rmSync(join(workspace, "bench"), { recursive: true, force: true })
      throughput("workspace_write", `${writeSize / MiB} MiB`, writes)
      // Profiling aid: `BENCH_WORKSPACE_PARTS=write` stops after the write figures (export and RSS not run).
      if (parts === "write") return { figures, notes: ["workspace: write figures only (BENCH_WORKSPACE_PARTS=write)"] }

      // Exports: a tree of 512 KiB files (the daemon's archive adds headers and padding; bytes are file data).
      makeTree(workspace, exportFiles, exportFileSize)
      const treeBytes = exportFiles * exportFileSize
      const exports = await rounds(ctx, "export", [
        { name: "daemon", run: async () => ({ bytes: treeBytes, cost: await daemonExport(core, session, workspace, () => {}) }) },
        { name: "raw", run: async () => rawExport(() => r.export(1)) },
        { name: "control", run: async () => rawExport(() => r.export(3)) }
      ], n)

      throughput("workspace_export", `${exportFiles} × 512 KiB`, exports)

      // RSS while exporting the large tree (the export tree above is replaced by it).
      for (const entry of ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"]) rmSync(join(workspace, entry), { recursive: true, force: true })
      makeTree(workspace, rssFiles, rssFileSize)
      const rssTotal = rssFiles * rssFileSize
      ctx.log(`rss: exporting ${rssTotal / MiB} MiB`)
      // Three streamed exports, one after another: a single export's second half can hold one sawtooth peak of
      // garbage awaiting a collection (V8 collects external buffers by volume, so the peak is bounded, not cumulative);
      // growth is judged on every export, flatness on their median.
      const streamedRuns: Array<Awaited<ReturnType<typeof exportRss>>> = []
      for (let i = 0; i < StreamedRssExports; i++) {
        const streamed = await exportRss(ctx, core, session, workspace, rssTotal, false)
        ctx.log(`rss: streamed export ${i + 1}/${StreamedRssExports}: growth ${(streamed.growth / MiB).toFixed(1)} MiB, second half ${(streamed.secondHalf / MiB).toFixed(1)} MiB`)
        streamedRuns.push(streamed)
      }
      const keeping = await exportRss(ctx, core, session, workspace, rssTotal, true)
      ctx.log(`rss: keeping consumer growth ${(keeping.growth / MiB).toFixed(1)} MiB, second half ${(keeping.secondHalf / MiB).toFixed(1)} MiB`)
      const size = `${rssTotal / MiB} MiB`
      // A streamed export that did not complete is not judged a pass (NaN meets no target).
      const judgedGrowth = (key: "growth" | "secondHalf") => streamedRuns.map((g) => (g.completed ? g[key] / MiB : Number.NaN))
      figures.push(figure({
        suite: "workspace",
        name: `RSS growth exporting ${size} (max during − before)`,
        unit: "MiB",
        samples: judgedGrowth("growth"),
        target: { on: "value", op: "<", value: 100, over: "every" },
        control: { name: "a consumer that keeps every chunk", samples: [keeping.growth / MiB] }
      }))
      figures.push(figure({
        suite: "workspace",
        name: `RSS growth over the second half of the ${size} export (flat)`,
        unit: "MiB",
        samples: judgedGrowth("secondHalf"),
        target: { on: "value", op: "<", value: 16 },
        control: { name: "a consumer that keeps every chunk", samples: [keeping.secondHalf / MiB] }
      }))
      return {
        figures,
        notes: [
          "workspace: gateway + Core's WorkspaceWrite / WorkspaceExport drivers and the daemon (path-safe staging, SHA-256, " +
            "fsync + rename; tar stream from disk) in one process over loopback; the raw ws baseline does the same frames, " +
            "receipts and disk work (base64, SHA-256, positioned writes, fsync + rename; file reads) without the codec, the " +
            "gateway, the Effect runtime or the path-safety checks. CPU = the bench process's user + system time over the transfer.",
          `workspace: each export round acquires and releases a read-only preparation outside the measured time; RSS is sampled ` +
            `every MiB of the ${size} export, ${StreamedRssExports} streamed exports (growth judged on every one, flatness on ` +
            `their median) and one for the keeping control` +
            streamedRuns.map((r, i) => r.completed ? "" : `; streamed export ${i + 1} ended after ${Math.round(r.exported / MiB)} MiB (not judged a pass)`).join("") +
            (keeping.completed ? "" : `; the keeping control ended after ${Math.round(keeping.exported / MiB)} MiB (at the Runtime's 180 s budget), its growth is over that part`)
        ]
      }
    } finally {
      await raw?.close()
      await daemon.stop()
      await core.dispose()
      rmSync(workspace, { recursive: true, force: true })
      rmSync(rawDir, { recursive: true, force: true })
    }
  }
}
