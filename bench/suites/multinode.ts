/**
 * Multinode suite (issue 19, "Turns/s and events/s for 1 and 3 nodes on this machine, with the PostgreSQL cost
 * per event"). Real `agentwire core --port 0` processes (dist/agentwire.mjs) on one PostgreSQL schema
 * (AGENTWIRE_CORE_DATABASE with `search_path`, as test/e2e/pg/multinode3.pg.live.test.ts starts them), the real
 * daemon (`Daemon.run`, the scripted harness) for each device in one `runtime-peer` child, the bench driving the
 * operator API over HTTP.
 *
 * - A round is one variant on its own fresh schema (created before, dropped after, its processes ended): `N`
 *   nodes (1 or 3), `D` devices spread over the nodes (device i connects to node i mod N), `C` Sessions pinned
 *   round-robin to the devices, created through random nodes. Measured: the `C` Sessions each run `K` scripted
 *   Turns of a few deltas one after another, all Sessions concurrently; each Turn is POSTed through a random node
 *   (on 3 nodes two thirds are routed to the owning node) and followed over SSE on that node to its `outcome`.
 * - Per round: Turns/s and journal events/s (wall clock; events = the schema's `turn_events` rows written in the
 *   window), CPU of the Core processes summed (`/proc/<pid>/stat`) and of the PostgreSQL server (every process
 *   named `postgres`, with its reaped children), both per Turn and per event, and WAL bytes per event
 *   (`pg_current_wal_lsn` difference). The PostgreSQL figures are cluster-wide: other clients of the server
 *   during the window are counted too (the note says so).
 * - Baseline: the 1-node round of the same index (rounds interleaved 1, 3, 3, 1, …); the ratio is 3 nodes over
 *   1 node. On 2 cores, 3 nodes cannot be faster: the ratio shows what routing and the shared database cost.
 * - Target: 3 nodes keep ≥ 50 % of the 1-node Turns/s. Negative control (a path with a known added delay): in
 *   each 3-node round, one Session's Turns strictly one after another through random nodes with 200 ms before
 *   each POST (at most 5 Turns/s), judged by the same target against the same 1-node baseline; it must miss.
 *   One Session in sequence without the delay is reported too: on a CPU-bound 2-core machine it comes close
 *   to the concurrent rate, so it cannot serve as the control.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from "node:fs"
import { join } from "node:path"
import { randomBytes } from "node:crypto"
import { figure, type Figure, formatNumber } from "../lib/figures.js"
import { percentile } from "../lib/stats.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { type OperatorClient, operatorClient } from "../support/operatorClient.js"
import { postgresCpuMicros, processCpuMicros } from "../support/procCpu.js"
import { benchDatabaseUrl, freshSchemaName, issueCredentials, type PgAdmin, pgAdmin, probePostgres, urlForSchema } from "../support/postgres.js"
import { benchTempDir, type Child, op, spawnChild } from "../support/processes.js"

const Deltas = 4
/** The negative control's known added delay before each POST (a path at most 1 / 0.2 s = 5 Turns/s). */
const ControlDelayMs = 200
const script = { script: Array.from({ length: Deltas }, (_, i) => ({ delta: `The parser accepts trailing commas only in part ${i + 1}. ` })) }
const turnInput = { input: [{ content: [{ type: "input_text", text: JSON.stringify(script) }] }] }

interface Node {
  readonly child: ChildProcess
  readonly url: string
  readonly client: OperatorClient
}

interface Round {
  readonly nodes: number
  readonly turns: number
  readonly wallMs: number
  readonly events: number
  readonly coreCpuUs: number
  readonly pgCpuUs: number
  readonly walBytes: number
  readonly daemonCpuUs: number
  readonly pgProcesses: number
  /** 3-node rounds: one Session, Turns in sequence (Turns/s), else undefined. */
  readonly serialRate?: number
  /** 3-node rounds, the negative control: one Session in sequence, 200 ms before each POST (Turns/s). */
  readonly delayedRate?: number
}

/** Starts `agentwire core` on a free port with the store in `databaseUrl`; resolves when it printed its URL. */
const startNode = (binary: string, dir: string, databaseUrl: string, token: string): Promise<Node> =>
  new Promise((resolve, reject) => {
    const log = openSync(join(benchTempDir(), `core-${Date.now()}-${randomBytes(3).toString("hex")}.log`), "a", 0o600)
    const child = spawn(process.execPath, [binary, "core", "--port", "0", "--data-dir", dir, "--heartbeat-seconds", "15"], {
      stdio: ["ignore", "pipe", log],
      // The database URL and the operator token travel in the environment, never argv.
      env: { ...process.env, NODE_OPTIONS: "", AGENTWIRE_CORE_DATABASE: databaseUrl, AGENTWIRE_OPERATOR_TOKEN: token }
    })
    closeSync(log)
    let out = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error("agentwire core did not print its URL within 60 s"))
    }, 60_000)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      reject(new Error(`agentwire core exited (${code ?? signal}) before listening`))
    })
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      if (out.includes("\n")) return
      out += chunk
      const end = out.indexOf("\n")
      if (end < 0) return
      clearTimeout(timer)
      const url = out.slice(0, end).trim()
      resolve({ child, url, client: operatorClient(url, token) })
    })
  })

/** SIGTERM, then SIGKILL after 10 s. */
const stopNode = (node: Node): Promise<void> =>
  new Promise((resolve) => {
    node.client.close()
    if (node.child.exitCode !== null || node.child.signalCode !== null) return resolve()
    const timer = setTimeout(() => node.child.kill("SIGKILL"), 10_000)
    node.child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    node.child.kill("SIGTERM")
  })

const waitOnline = async (client: OperatorClient, deviceId: string, timeoutMs: number) => {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    const got = await client.call("GET", `/devices/${deviceId}`)
    const view = got.body as { online?: boolean; declaration?: unknown } | undefined
    if (got.status === 200 && view?.online === true && view.declaration !== null && view.declaration !== undefined) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`device ${deviceId} did not come online within ${timeoutMs} ms`)
}

const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(Math.random() * xs.length)]!

/** POSTs one Turn through `via` and follows it there to its outcome (which must be `completed`). */
const oneTurn = async (via: Node, sessionId: string): Promise<void> => {
  const posted = await via.client.call("POST", `/sessions/${sessionId}/turns`, turnInput)
  if (posted.status !== 202) throw new Error(`POST /turns answered ${posted.status}: ${JSON.stringify(posted.body).slice(0, 200)}`)
  const status = await via.client.follow((posted.body as { turn_id: string }).turn_id)
  if (status !== "completed") throw new Error(`a Turn ended ${status}`)
}

const count = async (admin: PgAdmin, schema: string): Promise<number> =>
  Number((await admin.query(`SELECT COUNT(*)::int AS n FROM ${schema}.turn_events`))[0]!["n"])
const walLsn = async (admin: PgAdmin): Promise<string> => String((await admin.query("SELECT pg_current_wal_lsn()::text AS l"))[0]!["l"])
const walBytes = async (admin: PgAdmin, from: string): Promise<number> =>
  Number((await admin.query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${from}')::float8 AS d`))[0]!["d"])

interface Params {
  readonly devices: number
  readonly concurrency: number
  readonly perSession: number
  readonly controlTurns: number
}

/** One variant on a fresh schema: start, warm up, measure, end everything (also on failure). */
const runRound = async (ctx: SuiteContext, admin: PgAdmin, url: string, nodeCount: number, p: Params): Promise<Round> => {
  const binary = join(ctx.root, "dist", "agentwire.mjs")
  const schema = freshSchemaName()
  const token = `bench-${randomBytes(18).toString("base64url")}`
  const dir = mkdtempSync(join(benchTempDir(), "multinode-"))
  const nodes: Array<Node> = []
  let peer: Child | undefined
  await admin.query(`CREATE SCHEMA ${schema}`)
  try {
    const databaseUrl = urlForSchema(url, schema)
    // The first node migrates the schema alone; the others then start on a migrated one (as in production).
    nodes.push(await startNode(binary, join(dir, "n0"), databaseUrl, token))
    nodes.push(...await Promise.all(Array.from({ length: nodeCount - 1 }, (_, i) => startNode(binary, join(dir, `n${i + 1}`), databaseUrl, token))))
    const deviceIds = Array.from({ length: p.devices }, (_, i) => `mn-${i}`)
    const credentials = await issueCredentials(url, schema, deviceIds)
    peer = spawnChild(ctx.self, "runtime-peer")
    for (const [i, deviceId] of deviceIds.entries()) {
      peer.send({
        op: "daemon",
        coreUrl: nodes[i % nodeCount]!.url,
        deviceId,
        credential: credentials[i]!,
        maxActive: p.concurrency + 2,
        maxIdleExecutors: p.concurrency + 2
      })
      await peer.next(op("daemon-started"))
    }
    for (const [i, deviceId] of deviceIds.entries()) await waitOnline(nodes[i % nodeCount]!.client, deviceId, 60_000)

    const sessions: Array<string> = []
    for (let i = 0; i < p.concurrency + 1; i++) {
      const created = await pick(nodes).client.call("POST", "/sessions", { agent_kind: "scripted", device_id: deviceIds[i % p.devices] })
      if (created.status !== 201) throw new Error(`POST /sessions answered ${created.status}: ${JSON.stringify(created.body).slice(0, 200)}`)
      sessions.push((created.body as { session_id: string }).session_id)
    }
    const serial = sessions.pop()!
    // Warm-up: every Session's first Turn (executors, routes, prepared statements), not measured.
    await Promise.all(sessions.map((s) => oneTurn(pick(nodes), s)))
    await oneTurn(pick(nodes), serial)

    const events0 = await count(admin, schema)
    const wal0 = await walLsn(admin)
    peer.send({ op: "cpu" })
    const daemon0 = (await peer.next(op("cpu")))["micros"] as number
    const pg0 = postgresCpuMicros()
    const core0 = nodes.map((n) => processCpuMicros(n.child.pid!))
    const t0 = performance.now()
    await Promise.all(sessions.map(async (s) => {
      for (let i = 0; i < p.perSession; i++) await oneTurn(pick(nodes), s)
    }))
    const wallMs = performance.now() - t0
    const core1 = nodes.map((n) => processCpuMicros(n.child.pid!))
    const pg1 = postgresCpuMicros()
    peer.send({ op: "cpu" })
    const daemon1 = (await peer.next(op("cpu")))["micros"] as number
    const walDelta = await walBytes(admin, wal0)
    const events = (await count(admin, schema)) - events0

    let serialRate: number | undefined
    let delayedRate: number | undefined
    if (nodeCount > 1) {
      const s0 = performance.now()
      for (let i = 0; i < p.controlTurns; i++) await oneTurn(pick(nodes), serial)
      serialRate = p.controlTurns / ((performance.now() - s0) / 1000)
      const d0 = performance.now()
      for (let i = 0; i < p.controlTurns; i++) {
        await new Promise((resolve) => setTimeout(resolve, ControlDelayMs))
        await oneTurn(pick(nodes), serial)
      }
      delayedRate = p.controlTurns / ((performance.now() - d0) / 1000)
    }
    return {
      nodes: nodeCount,
      turns: sessions.length * p.perSession,
      wallMs,
      events,
      coreCpuUs: core1.reduce((a, x, i) => a + x - core0[i]!, 0),
      pgCpuUs: pg1.micros - pg0.micros,
      walBytes: walDelta,
      daemonCpuUs: daemon1 - daemon0,
      pgProcesses: pg1.processes,
      ...(serialRate === undefined ? {} : { serialRate }),
      ...(delayedRate === undefined ? {} : { delayedRate })
    }
  } finally {
    await peer?.stop()
    await Promise.all(nodes.map(stopNode))
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    rmSync(dir, { recursive: true, force: true })
  }
}

const rate = (r: Round) => r.turns / (r.wallMs / 1000)
const eventRate = (r: Round) => r.events / (r.wallMs / 1000)
const median = (xs: ReadonlyArray<number>) => percentile(xs, 50)

export const multinodeSuite: Suite = {
  name: "multinode",
  describe: "Turns through 1 vs 3 `agentwire core` nodes on one PostgreSQL schema (real daemons, Turns through random nodes); Core and PostgreSQL CPU per event",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const url = benchDatabaseUrl()
    const why = await probePostgres(url)
    if (why !== undefined) {
      const note = `multinode: skipped: PostgreSQL does not answer (${why}); set AGENTWIRE_TEST_DATABASE_URL to run it`
      ctx.log(note)
      return { figures: [], notes: [note] }
    }
    if (!existsSync(join(ctx.root, "dist", "agentwire.mjs"))) {
      throw new Error("multinode: dist/agentwire.mjs is missing: build with `npx node build.mjs --bench` first")
    }
    const p = ctx.quick
      ? { rounds: 1, devices: 3, concurrency: 6, perSession: 3, controlTurns: 4 }
      : { rounds: 3, devices: 6, concurrency: 12, perSession: 8, controlTurns: 10 }
    let admin: PgAdmin
    try {
      admin = await pgAdmin(url)
    } catch (error) {
      const note = `multinode: skipped: PostgreSQL refused the admin connection (${error instanceof Error ? error.message.slice(0, 200) : "error"})`
      ctx.log(note)
      return { figures: [], notes: [note] }
    }
    try {
      const one: Array<Round> = []
      const three: Array<Round> = []
      for (let r = 0; r < p.rounds; r++) {
        // Interleaved, alternating which variant goes first: 1, 3 | 3, 1 | 1, 3 …
        for (const n of r % 2 === 0 ? [1, 3] : [3, 1]) {
          const round = await runRound(ctx, admin, url, n, p)
          ;(n === 1 ? one : three).push(round)
          ctx.log(
            `multinode round ${r + 1}/${p.rounds}, ${n} node${n === 1 ? "" : "s"}: ${formatNumber(rate(round))} Turns/s, ` +
              `${formatNumber(eventRate(round))} events/s, Core ${formatNumber(round.coreCpuUs / round.events)} µs and PostgreSQL ` +
              `${formatNumber(round.pgCpuUs / round.events)} µs CPU per event, ${formatNumber(round.walBytes / round.events)} WAL bytes per event` +
              (round.serialRate === undefined
                ? ""
                : `; one Session in sequence ${formatNumber(round.serialRate)} Turns/s, with ${ControlDelayMs} ms before each POST ${formatNumber(round.delayedRate ?? Number.NaN)} Turns/s`)
          )
        }
      }
      const base = (name: string, f: (r: Round) => number) => ({ name: `1 node, ${name}`, samples: one.map(f) })
      const suite = "multinode"
      const figures: Array<Figure> = [
        figure({
          suite,
          name: `Turns/s (wall), 3 nodes, ${p.concurrency} Sessions, Turns through random nodes`,
          unit: "Turns/s",
          samples: three.map(rate),
          baseline: base("same load", rate),
          target: { on: "ratio", op: ">=", value: 0.5 },
          control: { name: `3 nodes, one Session in sequence, ${ControlDelayMs} ms before each POST`, samples: three.map((r) => r.delayedRate ?? Number.NaN) },
          note: `${Deltas}-delta scripted Turns, POST + SSE follow on a random node; on 2 cores 3 nodes cannot be faster: the ratio is the cost of routing and the shared database`
        }),
        figure({
          suite,
          name: "Turns/s (wall), 3 nodes, one Session, Turns in sequence",
          unit: "Turns/s",
          samples: three.map((r) => r.serialRate ?? Number.NaN),
          baseline: base(`${p.concurrency} Sessions`, rate),
          note: "one Turn at a time through random nodes: the latency of a (mostly routed) Turn, nothing concurrent"
        }),
        figure({ suite, name: "journal events/s (wall), 3 nodes", unit: "events/s", samples: three.map(eventRate), baseline: base("same load", eventRate) }),
        figure({
          suite,
          name: "Core CPU per Turn, all nodes summed, 3 nodes",
          unit: "µs",
          samples: three.map((r) => r.coreCpuUs / r.turns),
          baseline: base("one Core", (r) => r.coreCpuUs / r.turns)
        }),
        figure({
          suite,
          name: "Core CPU per event, all nodes summed, 3 nodes",
          unit: "µs",
          samples: three.map((r) => r.coreCpuUs / r.events),
          baseline: base("one Core", (r) => r.coreCpuUs / r.events),
          note: `events per Turn ${formatNumber(median(three.map((r) => r.events / r.turns)))} (turn_events rows)`
        }),
        figure({
          suite,
          name: "PostgreSQL CPU per event, 3 nodes",
          unit: "µs",
          samples: three.map((r) => r.pgCpuUs / r.events),
          baseline: base("one Core", (r) => r.pgCpuUs / r.events),
          note: `every process named postgres (${median(three.map((r) => r.pgProcesses))} at the end of a round) and its reaped children; cluster-wide`
        }),
        figure({
          suite,
          name: "PostgreSQL CPU per Turn, 3 nodes",
          unit: "µs",
          samples: three.map((r) => r.pgCpuUs / r.turns),
          baseline: base("one Core", (r) => r.pgCpuUs / r.turns)
        }),
        figure({
          suite,
          name: "WAL bytes per event, 3 nodes",
          unit: "B",
          samples: three.map((r) => r.walBytes / r.events),
          baseline: base("one Core", (r) => r.walBytes / r.events),
          note: "pg_current_wal_lsn difference over the window; cluster-wide"
        })
      ]
      const notes = [
        `multinode: ${p.rounds} interleaved rounds of 1 and 3 \`agentwire core\` processes on one PostgreSQL schema each (fresh per round, ` +
          `dropped after), ${p.devices} real daemons in one child spread over the nodes, ${p.concurrency} Sessions × ${p.perSession} ` +
          `${Deltas}-delta scripted Turns POSTed and followed through random nodes; one Session × ${p.controlTurns} Turns in sequence on 3 nodes, ` +
          `and the control: the same with ${ControlDelayMs} ms before each POST. PostgreSQL CPU and WAL are cluster-wide (other clients of the server in the window count too); daemon CPU per Turn ` +
          `1 node ${formatNumber(median(one.map((r) => r.daemonCpuUs / r.turns)))} µs, 3 nodes ${formatNumber(median(three.map((r) => r.daemonCpuUs / r.turns)))} µs`
      ]
      return { figures, notes }
    } finally {
      await admin.close()
    }
  }
}
