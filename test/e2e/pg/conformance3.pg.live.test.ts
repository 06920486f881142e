/**
 * The Core conformance kit (`agentwire conformance core`, the bundled binary acting as a scripted Runtime) against
 * **one node of a three-node Core** on PostgreSQL (docs/multi-node.md "Tests"): three real `agentwire core`
 * processes on one schema, the kit connected to node B. Every scenario a Runtime can drive passes exactly as
 * against a single-node Core (test/conformance/core-kit.live.test.ts), and none fails; then the device's owner
 * lease names node B. Real processes and time: a *.live.test.ts.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import { type Proc, run, startCore, stopAll, tempDir } from "../../support/devcoreLive.js"
import { coreKitScenarios } from "../../support/conformanceLive.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, queryIn, testDatabaseUrl } from "../../support/postgres.js"

const device = "5a3c7e10-8d2b-4f61-9c0e-2b7d4e6f8a19"
const eligible = coreKitScenarios

/** A Core node on the shared schema, with Core's own heartbeat cadence. */
const startNode = async (dir: string, env: Record<string, string>): Promise<{ readonly proc: Proc; readonly url: string }> => {
  const proc = await startCore(dir, 0, { env, heartbeatSeconds: null, listenWithinMs: 30_000 })
  return { proc, url: proc.url }
}

describePostgres("the Core conformance kit against one node of a three-node Core", (url) => {
  let schema: string
  let dir: string
  let nodes: Array<{ readonly proc: Proc; readonly url: string }> = []
  let credentialFile: string
  let credential: string

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-kit3-")
    const env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema), AGENTWIRE_OPERATOR_TOKEN: "op-token-kit3" }
    // One node first (it migrates), then the two others.
    nodes = [await startNode(join(dir, "a"), env)]
    nodes.push(...await Promise.all(["b", "c"].map((name) => startNode(join(dir, name), env))))
    credential = await Effect.runPromise(Effect.scoped(Effect.gen(function* () {
      const ctx = yield* Layer.build(Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layer)))
      return Redacted.value(yield* Context.get(ctx, DeviceStore).issueCredential(device))
    })))
    credentialFile = join(dir, "device.credential")
    writeFileSync(credentialFile, credential + "\n", { mode: 0o600 })
  }, 120_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  it("passes every scenario a Runtime can drive against node B, as against one node", async () => {
    const nodeB = nodes[1]!
    const kit = run(["conformance", "core", "--url", nodeB.url, "--device-id", device, "--credential-file", credentialFile, "--json"])
    const code = await Promise.race([kit.exited, new Promise<"timeout">((done) => setTimeout(() => done("timeout"), 90_000))])
    assert.strictEqual(code, 0, kit.stderr + kit.stdout)
    const report = JSON.parse(kit.stdout) as { results: Array<{ scenario: string; verdict: { _tag: string } }> }
    const passed = report.results.filter((r) => r.verdict._tag === "Pass").map((r) => r.scenario)
    assert.deepStrictEqual([...passed].sort(), [...eligible].sort())
    assert.isTrue(report.results.every((r) => r.verdict._tag !== "Fail"))
    assert.notInclude(kit.stdout + kit.stderr, credential)
    // The kit's connections went to node B: the device's owner lease names it.
    const rows = await queryIn(url, schema, `SELECT node_id FROM device_leases WHERE device_id = '${device}'`)
    assert.deepStrictEqual(rows.map((r) => String(r.node_id)), [nodeB.url])
  }, 120_000)
})
