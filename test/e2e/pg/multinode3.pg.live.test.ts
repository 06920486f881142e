/**
 * Three `agentwire core` processes on one PostgreSQL schema (docs/multi-node.md, issue #19): 200 light scripted
 * devices (test/support/lightDevices.ts: one real WebSocket each, no daemon process — 200 daemons do not fit a
 * 2-core machine next to three Cores) spread over the nodes. Turns started through random nodes all complete
 * with every event journaled once; a node killed with SIGKILL mid-Turn has exactly its Turns reconciled
 * (`event_stream_incomplete`, by the other nodes' lease sweepers) while the Turns in flight on the live nodes
 * are untouched and complete; the killed node's devices reconnect to the other nodes with higher lease
 * generations; a device flapping between two nodes has one owner generation per connection, in order.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import { eventually, operator, type Proc, startCore, stopAll, tempDir, text } from "../../support/devcoreLive.js"
import { LightDevice } from "../../support/lightDevices.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, queryIn, testDatabaseUrl } from "../../support/postgres.js"

const Devices = 200
const Deltas = 6
const token = "op-token-three-nodes"

interface Node {
  readonly proc: Proc
  readonly url: string
  readonly api: ReturnType<typeof operator>
}

const startNode = async (dir: string, env: Record<string, string>): Promise<Node> => {
  const proc = await startCore(dir, 0, { env, heartbeatSeconds: 5, listenWithinMs: 30_000 })
  return { proc, url: proc.url, api: operator(proc.url, token) }
}

/** Runs `f` over `items` with at most `n` at once. */
const pool = async <A, B>(items: ReadonlyArray<A>, n: number, f: (a: A, i: number) => Promise<B>): Promise<Array<B>> => {
  const out: Array<B> = new Array(items.length)
  let next = 0
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await f(items[i]!, i)
    }
  }))
  return out
}

describePostgres("three Core nodes on PostgreSQL (end to end)", (url) => {
  let schema: string
  let dir: string
  let nodes: Array<Node> = []
  const devices: Array<LightDevice> = []
  const q = (sql: string) => queryIn(url, schema, sql)

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-three-")
    const env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema), AGENTWIRE_OPERATOR_TOKEN: token }
    nodes = await Promise.all(["a", "b", "c"].map((name) => startNode(join(dir, name), env)))
    // Credentials straight through the store (200 `credential create` processes would take minutes).
    const credentials = await Effect.runPromise(Effect.scoped(Effect.gen(function* () {
      const ctx = yield* Layer.build(Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layer)))
      const store = Context.get(ctx, DeviceStore)
      return yield* Effect.forEach(
        Array.from({ length: Devices }, (_, i) => `dev-${i}`),
        (id) => Effect.map(store.issueCredential(id), (c) => [id, Redacted.value(c)] as const),
        { concurrency: 8 }
      )
    })))
    for (const [deviceId, credential] of credentials) devices.push(new LightDevice({ deviceId, credential, deltas: Deltas }))
    await pool(devices, 20, (d, i) => d.connect(nodes[i % 3]!.url))
    await eventually(async () => {
      const rows = await q(`SELECT COUNT(*) AS n FROM device_leases WHERE expires_at_ms > ${Date.now()}`)
      return Number(rows[0]!.n) === Devices ? true : undefined
    }, 30_000, "every device's lease")
  }, 120_000)

  afterAll(async () => {
    for (const d of devices) d.close()
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const random = () => nodes[Math.floor(Math.random() * nodes.length)]!

  /** A Session pinned to the device, and a Turn started through `via`. */
  const startTurn = async (deviceId: string, via: Node) => {
    const session = await via.api.post("/sessions", { agent_kind: "scripted", device_id: deviceId })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const started = await via.api.post(`/sessions/${session.body.session_id}/turns`, { input: text("go") })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    return started.body.turn_id as string
  }

  const turnRows = (ids: ReadonlyArray<string>) =>
    q(`SELECT turn_id, status, error_code, observation_reason, owner_node, owner_generation, device_id FROM turns
      WHERE turn_id IN (${ids.map((id) => `'${id}'`).join(",")})`)

  it("runs Turns started through random nodes to completion, every event journaled once", async () => {
    const turnIds = await pool(devices, 16, (d) => startTurn(d.deviceId, random()))
    await eventually(async () => {
      const rows = await turnRows(turnIds)
      return rows.every((r) => r.status === "completed") ? rows : undefined
    }, 60_000, "every Turn completed")
    const frames = await q(`SELECT turn_id, type, body_json FROM turn_events WHERE kind = 'frame' ORDER BY turn_id, seq`)
    const byTurn = new Map<string, Array<string>>()
    for (const f of frames) {
      const list = byTurn.get(String(f.turn_id)) ?? []
      list.push(f.type === "delta" ? `delta:${JSON.parse(String(f.body_json)).payload.sequence}` : String(f.type))
      byTurn.set(String(f.turn_id), list)
    }
    const expected = [...Array.from({ length: Deltas }, (_, i) => `delta:${i + 1}`), "done"]
    for (const id of turnIds) assert.deepStrictEqual(byTurn.get(id)?.filter((t) => t !== "started"), expected, id)
  }, 120_000)

  it("reconciles exactly the Turns of a node killed mid-Turn; the devices move on with higher generations", async () => {
    const [a, b, c] = nodes as [Node, Node, Node]
    const others = [a, b]
    for (const d of devices) {
      d.hold = true
      d.fallback = () => others[Math.floor(Math.random() * 2)]!.url
    }
    // Ten Turns in flight on each node (through the owning node), each holding its Run before `done`.
    const onNode = (node: Node) => devices.filter((d) => d.url === node.url).slice(0, 10)
    const picked = { a: onNode(a), b: onNode(b), c: onNode(c) }
    const leasesBefore = new Map((await q(`SELECT device_id, generation FROM device_leases`)).map((r) => [String(r.device_id), Number(r.generation)]))
    const turns = {
      a: await Promise.all(picked.a.map((d) => startTurn(d.deviceId, a))),
      b: await Promise.all(picked.b.map((d) => startTurn(d.deviceId, b))),
      c: await Promise.all(picked.c.map((d) => startTurn(d.deviceId, c)))
    }
    const all = [...turns.a, ...turns.b, ...turns.c]
    await eventually(async () => {
      const rows = await q(`SELECT turn_id, COUNT(*) AS n FROM turn_events WHERE kind = 'frame' AND type = 'delta'
        AND turn_id IN (${all.map((id) => `'${id}'`).join(",")}) GROUP BY turn_id`)
      return rows.length === all.length ? true : undefined
    }, 30_000, "every held Turn streaming")

    c.proc.child.kill("SIGKILL")
    await c.proc.exited
    const reconciled = await eventually(async () => {
      const rows = await turnRows(turns.c)
      return rows.every((r) => r.status !== "running" && r.status !== "queued") ? rows : undefined
    }, 40_000, "the killed node's Turns reconciled")
    for (const r of reconciled) {
      assert.deepStrictEqual([r.status, r.error_code], ["failed", "event_stream_incomplete"], String(r.turn_id))
      assert.include(["replaced", "core_restarted"], String(r.observation_reason))
      assert.strictEqual(r.owner_node, c.url)
    }
    // The live nodes' Turns were not touched: still running, then completed once released.
    for (const r of await turnRows([...turns.a, ...turns.b])) assert.strictEqual(r.status, "running", String(r.turn_id))
    for (const d of [...picked.a, ...picked.b]) d.release()
    await eventually(async () => {
      const rows = await turnRows([...turns.a, ...turns.b])
      return rows.every((r) => r.status === "completed") ? true : undefined
    }, 30_000, "the live nodes' Turns completed")

    // Every device of the killed node reconnected to a live node with a higher generation.
    const cDevices = devices.filter((d) => d.connections[0] === c.url).map((d) => d.deviceId)
    await eventually(async () => {
      const rows = await q(`SELECT device_id, node_url, generation, expires_at_ms FROM device_leases
        WHERE device_id IN (${cDevices.map((id) => `'${id}'`).join(",")})`)
      return rows.every((r) => r.node_url !== c.url && Number(r.generation) > leasesBefore.get(String(r.device_id))! &&
          Number(r.expires_at_ms) > Date.now())
        ? true
        : undefined
    }, 40_000, "the killed node's devices owned by live nodes")
    for (const d of devices) d.hold = false
  }, 150_000)

  it("a device flapping between two nodes has one owner generation per connection, in order", async () => {
    const [a, b] = nodes as [Node, Node, Node]
    const device = devices[devices.length - 1]!
    device.fallback = undefined
    const start = Number((await q(`SELECT generation FROM device_leases WHERE device_id = '${device.deviceId}'`))[0]!.generation)
    const seen: Array<[string, number]> = []
    for (let i = 0; i < 10; i++) {
      const node = i % 2 === 0 ? a : b
      device.close()
      await device.connect(node.url)
      // The upgrade is answered only after the lease was claimed: it is visible at once.
      const rows = await q(`SELECT node_url, generation FROM device_leases WHERE device_id = '${device.deviceId}'`)
      seen.push([String(rows[0]!.node_url), Number(rows[0]!.generation)])
    }
    assert.deepStrictEqual(seen, seen.map((_, i) => [i % 2 === 0 ? a.url : b.url, start + i + 1] as [string, number]))
    const status = await fetch(`${b.url}/api/v1/agent-daemon/device-status?device_id=${device.deviceId}`, {
      headers: { authorization: `Bearer ${(device as any).credential}` }
    }).then((r) => r.json() as Promise<any>)
    assert.deepStrictEqual([status.owner.node_url, status.owner.generation], [b.url, start + 10])
  }, 60_000)
})
