/**
 * Cold start and bundle suite (issue item 5). Cold start: the bundled binary `dist/agentwire.mjs daemon …` is
 * spawned against the bench's gateway, and the time from spawn to the first valid heartbeat Core receives is
 * taken (bootstrap, dial and the first heartbeat included). The baseline is the floor of any Node daemon on
 * this machine: a Node process that loads `ws`, dials the bench's raw server and sends one frame. Bundle: the
 * size of dist/agentwire-main.mjs (the bundle the dist/agentwire.mjs launcher imports) and its top contributors from
 * esbuild's metafile (dist/agentwire-main.meta.json).
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { gzipSync } from "node:zlib"
import { figure, type Figure } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices, startCore, watchDeclared } from "../support/core.js"
import { benchTempDir, withTimeout } from "../support/processes.js"
import { startRawServer } from "../support/rawServer.js"

/** Spawns a process and resolves once `ready` resolves; then stops it (SIGTERM, SIGKILL after 15 s) and waits. */
const timedRun = async (command: string, args: ReadonlyArray<string>, cwd: string, logFile: string, ready: Promise<number>) => {
  const t0 = performance.now()
  const child = spawn(command, [...args], { cwd, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NODE_OPTIONS: "" } })
  const chunks: Array<Buffer> = []
  child.stdout.on("data", (c: Buffer) => chunks.push(c))
  child.stderr.on("data", (c: Buffer) => chunks.push(c))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  try {
    const at = await withTimeout(Promise.race([ready, exited.then(() => Promise.reject(new Error(`process exited early; log: ${logFile}`)))]), 30_000, `first frame (log: ${logFile})`)
    return at - t0
  } finally {
    child.kill("SIGTERM")
    const killer = setTimeout(() => child.kill("SIGKILL"), 15_000)
    await exited
    clearTimeout(killer)
    writeFileSync(logFile, Buffer.concat(chunks))
  }
}

/** Bytes in the output per contributor: `node_modules/<package>` or `src/<part>`. */
const contributors = (metaFile: string, output: string): Array<[string, number]> => {
  const meta = JSON.parse(readFileSync(metaFile, "utf8")) as {
    outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>
  }
  const inputs = meta.outputs[output]?.inputs ?? {}
  const groups = new Map<string, number>()
  for (const [path, { bytesInOutput }] of Object.entries(inputs)) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)
    const key = m !== null ? m[1]! : path.startsWith("src/") ? path.split("/").slice(0, 2).join("/") : path
    groups.set(key, (groups.get(key) ?? 0) + bytesInOutput)
  }
  return [...groups].sort((a, b) => b[1] - a[1])
}

export const coldStartSuite: Suite = {
  name: "coldstart",
  describe: "daemon cold start of the bundled binary to the first heartbeat at Core; bundle size",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const figures: Array<Figure> = []
    const notes: Array<string> = []
    const binary = join(ctx.root, "dist", "agentwire.mjs")
    if (!existsSync(binary)) {
      return { figures, notes: [`coldstart: skipped, ${binary} is missing (run npm run bench, which builds it)`] }
    }
    const runs = ctx.quick ? 2 : 7
    const devices = makeDevices("cold", runs + 1)
    const core = await startCore(devices)
    const raw = await startRawServer()
    const dir = benchTempDir()
    const daemonTimes: Array<number> = []
    const floorTimes: Array<number> = []
    try {
      for (let i = 0; i <= runs; i++) {
        // Run 0 warms the file cache and is not counted.
        ctx.log(`coldstart: run ${i}/${runs}`)
        const floorReady = new Promise<number>((resolve) => raw.onNextConnectionFrame(() => resolve(performance.now())))
        const floor = await timedRun(
          process.execPath,
          ["-e", "const W = require('ws'); const w = new W(process.argv[1]); w.on('open', () => w.send('{\"type\":\"heartbeat\"}'))", raw.url],
          ctx.root,
          join(dir, `floor-${i}.log`),
          floorReady
        )
        const device = devices[i]!
        const profile = join(dir, `cold-${i}`)
        mkdirSync(profile, { recursive: true, mode: 0o700 })
        const credentialFile = join(profile, "credential")
        writeFileSync(credentialFile, device.credential, { mode: 0o600 })
        const watch = watchDeclared(core, device.deviceId)
        await watch.ready
        const daemon = await timedRun(
          process.execPath,
          [
            // BENCH_DAEMON_CPU_PROF=<dir> profiles each daemon start (docs/performance.md).
            ...(process.env["BENCH_DAEMON_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["BENCH_DAEMON_CPU_PROF"]}`] : []),
            binary, "daemon", "--core-url", core.baseUrl, "--device-id", device.deviceId, "--credential-file", credentialFile, "--profile", profile],
          ctx.root,
          join(dir, `daemon-${i}.log`),
          watch.declared
        )
        if (i > 0) {
          floorTimes.push(floor)
          daemonTimes.push(daemon)
        }
      }
    } finally {
      await raw.close()
      await core.dispose()
    }
    figures.push(figure({
      suite: "coldstart",
      name: "daemon spawn → first heartbeat at Core",
      unit: "ms",
      samples: daemonTimes,
      baseline: { name: "node + ws: first frame", samples: floorTimes }
    }))
    // dist/agentwire.mjs is the launcher (a version check); the bundle it imports is agentwire-main.mjs
    const bundle = join(ctx.root, "dist", "agentwire-main.mjs")
    const bytes = statSync(bundle).size
    const gzip = gzipSync(readFileSync(bundle)).length
    figures.push(figure({
      suite: "coldstart",
      name: "bundle dist/agentwire-main.mjs",
      unit: "KiB",
      samples: [bytes / 1024],
      baseline: { name: "gzip", samples: [gzip / 1024] }
    }))
    const metaFile = join(ctx.root, "dist", "agentwire-main.meta.json")
    if (existsSync(metaFile)) {
      const top = contributors(metaFile, "dist/agentwire-main.mjs").slice(0, 8)
      notes.push(`bundle: top contributors ${top.map(([k, b]) => `${k} ${Math.round(b / 1024)} KiB`).join(", ")}`)
    }
    notes.push(`coldstart: ${runs} runs after one uncounted warm-up (daemon logs kept with --keep-logs)`)
    return { figures, notes }
  }
}
