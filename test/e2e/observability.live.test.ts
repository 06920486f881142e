/**
 * Issue #22 (observability), end to end: the real dev Core binary and a real daemon (scripted harness), both
 * exporting OTLP/HTTP JSON to a small receiver on loopback (test/support/otlpReceiver.ts). One Turn (deltas,
 * a steer, usage, done) must produce ONE connected trace across both processes — Core's `Turn` span, its
 * phases, the daemon's handler spans as children of the phase that sent the frame, and the Harness calls below
 * those — and no span or resource attribute may carry the device credential, the operator token, the prompt
 * text or the Session's `agent_options`. The Turn span's parent is the operator request (`Turns.start` below the
 * HTTP server span); a second, cancelled Turn puts `Turn.cancel` → `Runtime.prompt_cancel` → `Harness.cancel` in
 * its trace and moves the cancel counters; a third, whose preparation fails, moves the admission counters by
 * outcome and code. `/metrics` (Core, with the token, and the separate no-token listener)
 * and `agentwire status --metrics` (daemon) are parsed with a strict Prometheus text parser, and the counters
 * must move as the Turn runs. Real processes and sockets: every wait is for an event, bounded by the timeout.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import {
  type CoreProc,
  createCredential,
  eventually,
  operator,
  type Proc,
  readSse,
  runToEnd,
  startCore,
  startDaemon,
  stopAll,
  tempDir
} from "../support/devcoreLive.js"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlpReceiver.js"
import { type Exposition, parsePrometheusText, sumOf, valueOf } from "../support/prometheusText.js"

const PromptMarker = "prompt-text-marker-7f3a"
const OptionsMarker = "agent-options-marker-91bc"

let dir: string
let receiver: OtlpReceiver
let core: CoreProc
let daemon: Proc
let token: string
let credential: string
let api: ReturnType<typeof operator>
let profile: string

const otelEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  OTEL_BSP_SCHEDULE_DELAY: "200",
  OTEL_METRIC_EXPORT_INTERVAL: "500",
  ...extra
})

const scrapeCore = async (): Promise<Exposition> => {
  const res = await fetch(`${core.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
  assert.strictEqual(res.status, 200)
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/)
  return parsePrometheusText(await res.text())
}

const scrapeDaemon = async (): Promise<Exposition> => {
  const result = await runToEnd(["status", "--metrics", "--profile", profile])
  assert.strictEqual(result.code, 0, result.stderr)
  return parsePrometheusText(result.stdout)
}

/** The metrics listener's URL from Core's stdout (`metrics (no token): URL`). */
const listenerUrl = () => /metrics \(no token\): (\S+)/.exec(core.stdout)?.[1]

beforeAll(async () => {
  dir = tempDir()
  receiver = await startOtlpReceiver()
  core = await startCore(dir, 0, {
    args: ["--metrics-listen", "127.0.0.1:0"],
    env: otelEnv({ OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=e2e" })
  })
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  api = operator(core.url, token)
  const created = await createCredential(dir, "dev-otel")
  credential = created.credential
  profile = join(dir, "profile")
  daemon = startDaemon(core.url, "dev-otel", created.file, profile, { args: ["--metrics-port", "0"], env: otelEnv() })
  await eventually(async () => {
    const device = await api.get("/devices/dev-otel")
    return device.body?.online === true && device.body.declaration !== null ? true : undefined
  }, 25_000, "dev-otel online with a declaration")
}, 60_000)

afterAll(async () => {
  await stopAll()
  await receiver?.close()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

/** Every string an attribute (span, event or resource) carries. */
const attributeStrings = (span: ReceivedSpan): ReadonlyArray<string> =>
  [span.attributes, span.resource, ...span.eventAttributes].flatMap((attrs) =>
    Object.values(attrs).map((v) => (typeof v === "string" ? v : JSON.stringify(v))))

/** The span's ancestors among `byId` (nearest first). */
const ancestors = (span: ReceivedSpan, byId: ReadonlyMap<string, ReceivedSpan>): ReadonlyArray<ReceivedSpan> => {
  const out: Array<ReceivedSpan> = []
  let parent = span.parentSpanId === undefined ? undefined : byId.get(span.parentSpanId)
  while (parent !== undefined && out.length < 64) {
    out.push(parent)
    parent = parent.parentSpanId === undefined ? undefined : byId.get(parent.parentSpanId)
  }
  return out
}

describe("observability (issue #22)", () => {
  let turnId: string
  let before: { core: Exposition; daemon: Exposition }

  it("runs a Turn with a steer while both sides export", async () => {
    before = { core: await scrapeCore(), daemon: await scrapeDaemon() }
    const session = await api.post("/sessions", {
      agent_kind: "scripted",
      configuration: { agent_options: { note: OptionsMarker } }
    })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const started = await api.post(`/sessions/${session.body.session_id}/turns`, {
      input: [{ content: [{ type: "input_text", text: JSON.stringify({ script: [{ delta: `one ${PromptMarker} ` }, { await_steer: 1 }, { delta: "two" }, { usage: { input_tokens: 3, output_tokens: 2 } }] }) }] }]
    })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    turnId = started.body.turn_id
    let steered = false
    const events = await readSse(core.url, token, turnId, async (event) => {
      if (!steered && event.event === "frame" && JSON.parse(event.data).type === "delta") {
        steered = true
        const steer = await api.post(`/turns/${turnId}/steer`, { input: [{ content: [{ type: "input_text", text: `steer ${PromptMarker}` }] }] })
        assert.strictEqual(steer.status, 200, JSON.stringify(steer.body))
      }
    })
    assert.strictEqual(JSON.parse(events[events.length - 1]!.data).outcome.status, "completed")
  }, 30_000)

  it("exports one connected trace across Core and the daemon with the expected span tree", async () => {
    const names = ["Turn", "Turn.prepare", "Turn.start", "Turn.events", "Turn.settle"]
    const turn = await eventually(() => {
      const spans = receiver.spans()
      const root = spans.find((s) => s.name === "Turn" && s.attributes["agentwire.turn_id"] === turnId)
      if (root === undefined) return undefined
      const trace = spans.filter((s) => s.traceId === root.traceId)
      const have = new Set(trace.map((s) => `${s.service}/${s.name}`))
      const wanted = [
        ...names.map((n) => `agentwire-core/${n}`),
        "agentwire-core/POST",
        "agentwire-core/Turns.start",
        "agentwire-core/Delivery.deliverPrepared",
        "agentwire-core/Turn.steer",
        "agentwire-daemon/Runtime.execution_prepare",
        "agentwire-daemon/Runtime.execution_start",
        "agentwire-daemon/Runtime.prompt_steer",
        "agentwire-daemon/Harness.prepare",
        "agentwire-daemon/Harness.start",
        "agentwire-daemon/Harness.steer"
      ]
      return wanted.every((w) => have.has(w)) ? { root, trace } : undefined
    }, 20_000, "the Turn's trace from both processes")
    assert.strictEqual(receiver.rejected(), 0)
    const byId = new Map(turn.trace.map((s) => [s.spanId, s]))
    const one = (service: string, name: string) => {
      const found = turn.trace.filter((s) => s.service === service && s.name === name)
      assert.strictEqual(found.length, 1, `${service}/${name}`)
      return found[0]!
    }
    // The Turn span continues the operator request that started it: Turns.start below the HTTP server span.
    const request = ancestors(turn.root, byId)
    assert.deepStrictEqual(request.map((s) => s.name), ["Turns.start", "POST"])
    assert.strictEqual(request[1]!.attributes["http.route"], "/api/v1/operator/sessions/:session_id/turns")
    assert.isUndefined(request[1]!.parentSpanId)
    // Delivery is a child of the Turn; preparation, start and events are phases of the delivery.
    const delivery = one("agentwire-core", "Delivery.deliverPrepared")
    assert.strictEqual(delivery.parentSpanId, turn.root.spanId)
    for (const name of ["Turn.prepare", "Turn.start", "Turn.events"]) {
      assert.strictEqual(one("agentwire-core", name).parentSpanId, delivery.spanId, name)
    }
    assert.strictEqual(one("agentwire-core", "Turn.settle").parentSpanId, turn.root.spanId)
    // The steer (its own operator request) runs below the Turn's span, so the daemon's handler joins the trace.
    const steer = one("agentwire-core", "Turn.steer")
    assert.strictEqual(steer.parentSpanId, turn.root.spanId)
    assert.include(ancestors(one("agentwire-daemon", "Runtime.prompt_steer"), byId).map((s) => s.spanId), steer.spanId)
    // The daemon's handler spans continue the phase that sent their frame (through the frame's traceparent).
    assert.strictEqual(one("agentwire-daemon", "Runtime.execution_prepare").parentSpanId, one("agentwire-core", "Turn.prepare").spanId)
    assert.strictEqual(one("agentwire-daemon", "Runtime.execution_start").parentSpanId, one("agentwire-core", "Turn.start").spanId)
    // The native calls sit below the handler that caused them, with the wire names as attributes.
    const harness = [
      ["Harness.prepare", "Runtime.execution_prepare", "execution_prepare"],
      ["Harness.start", "Runtime.execution_start", "execution_start"],
      ["Harness.steer", "Runtime.prompt_steer", "prompt_steer"]
    ] as const
    for (const [name, handler, wire] of harness) {
      const span = one("agentwire-daemon", name)
      assert.include(ancestors(span, byId).map((s) => s.name), handler, name)
      assert.strictEqual(span.attributes["agentwire.wire.type"], wire)
      assert.strictEqual(span.attributes["agentwire.harness.kind"], "scripted")
    }
    // Every daemon span of this Turn is in Core's trace, and every span of the trace reaches a collected root.
    for (const span of turn.trace) {
      const chain = ancestors(span, byId)
      const top = chain.length === 0 ? span : chain[chain.length - 1]!
      assert.isTrue(top.parentSpanId === undefined || !byId.has(top.parentSpanId), span.name)
      if (span.service === "agentwire-daemon") assert.include(chain.map((s) => s.spanId), turn.root.spanId, span.name)
    }
    assert.strictEqual(one("agentwire-core", "Turn.settle").attributes["agentwire.status"], "completed")
    assert.strictEqual(turn.root.resource["deployment.environment"], "e2e")
  }, 30_000)

  it("puts no credential, token, prompt text or agent_options in any exported attribute", async () => {
    const spans = receiver.spans()
    assert.isAbove(spans.length, 10)
    const secrets = [credential, token, PromptMarker, OptionsMarker]
    for (const span of spans) {
      for (const value of attributeStrings(span)) {
        for (const secret of secrets) assert.notInclude(value, secret, `${span.service}/${span.name}`)
      }
    }
    const everything = JSON.stringify(receiver.bodies)
    for (const secret of secrets) assert.notInclude(everything, secret)
  })

  it("moves Core's counters on /metrics (operator token) and serves the same on the no-token listener", async () => {
    const after = await scrapeCore()
    const delta = (name: string, labels: Record<string, string> = {}) => sumOf(after, name, labels) - sumOf(before.core, name, labels)
    assert.strictEqual(delta("agentwire_core_runs_started_total"), 1)
    assert.strictEqual(delta("agentwire_core_runs_finished_total", { status: "completed" }), 1)
    assert.strictEqual(valueOf(after, "agentwire_core_runs_active"), 0)
    assert.strictEqual(delta("agentwire_core_admissions_total", { outcome: "ready", code: "none" }), 1)
    assert.strictEqual(delta("agentwire_core_input_receipts_total", { phase: "written", outcome: "accepted" }), 1)
    assert.strictEqual(delta("agentwire_core_input_receipts_total", { phase: "applied", outcome: "accepted" }), 1)
    assert.strictEqual(delta("agentwire_core_input_receipts_total"), 2)
    assert.isAbove(delta("agentwire_core_frames_total", { direction: "in" }), 4)
    assert.isAbove(delta("agentwire_core_frame_bytes_total", { direction: "out" }), 100)
    assert.isAbove(delta("agentwire_core_journal_batch_size_count"), 0)
    assert.isAbove(delta("agentwire_core_journal_commit_seconds_count"), 0)
    assert.isAbove(sumOf(after, "agentwire_core_heartbeats_total"), 0)
    assert.strictEqual(valueOf(after, "agentwire_core_connections", { state: "open" }), 1)
    assert.strictEqual(after.families.get("agentwire_core_runs_started_total")?.type, "counter")
    assert.strictEqual(after.families.get("agentwire_core_journal_commit_seconds")?.type, "histogram")
    // Without the token: 401, and nothing leaks.
    const refused = await fetch(`${core.url}/metrics`)
    assert.strictEqual(refused.status, 401)
    assert.notInclude(await refused.text(), "agentwire_core")
    // The separate listener needs no token and serves the same families.
    const url = listenerUrl()
    assert.isString(url)
    const open = await fetch(url!)
    assert.strictEqual(open.status, 200)
    const viaListener = parsePrometheusText(await open.text())
    assert.strictEqual(sumOf(viaListener, "agentwire_core_runs_started_total"), sumOf(after, "agentwire_core_runs_started_total"))
    assert.strictEqual((await fetch(url!.replace(/\/metrics$/, "/other"))).status, 404)
  })

  it("moves the daemon's counters (agentwire status --metrics and --metrics-port)", async () => {
    const after = await scrapeDaemon()
    const delta = (name: string, labels: Record<string, string> = {}) => sumOf(after, name, labels) - sumOf(before.daemon, name, labels)
    assert.strictEqual(delta("agentwire_daemon_runs_started_total"), 1)
    assert.strictEqual(delta("agentwire_daemon_runs_finished_total", { status: "completed" }), 1)
    assert.strictEqual(valueOf(after, "agentwire_daemon_runs_active"), 0)
    assert.strictEqual(delta("agentwire_daemon_admissions_total", { outcome: "ready", code: "none" }), 1)
    assert.strictEqual(delta("agentwire_daemon_input_receipts_total", { phase: "written", outcome: "accepted" }), 1)
    assert.strictEqual(delta("agentwire_daemon_input_receipts_total", { phase: "applied", outcome: "accepted" }), 1)
    assert.strictEqual(delta("agentwire_daemon_input_receipts_total"), 2)
    assert.isAbove(delta("agentwire_daemon_frames_total", { direction: "out" }), 4)
    assert.isAbove(sumOf(after, "agentwire_daemon_heartbeats_total"), 0)
    assert.strictEqual(valueOf(after, "agentwire_daemon_connection_state", { state: "connected" }), 1)
    assert.strictEqual(valueOf(after, "agentwire_daemon_cleanups_unconfirmed"), 0)
    const url = /serving metrics.*url=(\S+)/.exec(daemon.stderr)?.[1]?.replace(/^"|"$/g, "")
    assert.isString(url, daemon.stderr.slice(0, 2000))
    assert.match(url!, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
    const res = await fetch(url!)
    assert.strictEqual(res.status, 200)
    assert.isAbove(sumOf(parsePrometheusText(await res.text()), "agentwire_daemon_runs_started_total"), 0)
    // Both processes also exported their metrics over OTLP.
    await eventually(() => {
      const names = receiver.metricNames()
      return names.has("agentwire_core_runs_started_total") && names.has("agentwire_daemon_runs_started_total") ? true : undefined
    }, 10_000, "OTLP metrics from both processes")
  })
  it("a cancelled Turn: Turn.cancel → Runtime.prompt_cancel → Harness.cancel in the Turn's trace, cancel outcomes counted", async () => {
    const before = { core: await scrapeCore(), daemon: await scrapeDaemon() }
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const started = await api.post(`/sessions/${session.body.session_id}/turns`, {
      input: [{ content: [{ type: "input_text", text: JSON.stringify({ script: [{ delta: `x ${PromptMarker}` }, { hang: true }] }) }] }]
    })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const id: string = started.body.turn_id
    let cancel: { status: number; body: any } | undefined
    const events = await readSse(core.url, token, id, async (event) => {
      if (cancel === undefined && event.event === "frame" && JSON.parse(event.data).type === "delta") {
        cancel = await api.post(`/turns/${id}/cancel`, {})
      }
    })
    assert.strictEqual(cancel?.status, 200)
    assert.strictEqual(cancel?.body.status, "cancelled", JSON.stringify(cancel?.body))
    assert.strictEqual(JSON.parse(events[events.length - 1]!.data).outcome.status, "cancelled")

    const tree = await eventually(() => {
      const spans = receiver.spans()
      const root = spans.find((s) => s.name === "Turn" && s.attributes["agentwire.turn_id"] === id)
      if (root === undefined) return undefined
      const trace = spans.filter((s) => s.traceId === root.traceId)
      const names = new Set(trace.map((s) => `${s.service}/${s.name}`))
      const wanted = ["agentwire-core/Turn.cancel", "agentwire-core/Turn.settle", "agentwire-daemon/Runtime.prompt_cancel", "agentwire-daemon/Harness.cancel"]
      return wanted.every((w) => names.has(w)) ? { root, trace } : undefined
    }, 20_000, "the cancelled Turn's trace")
    const byId = new Map(tree.trace.map((s) => [s.spanId, s]))
    const named = (service: string, name: string) => {
      const found = tree.trace.filter((s) => s.service === service && s.name === name)
      assert.strictEqual(found.length, 1, `${service}/${name}`)
      return found[0]!
    }
    const turnCancel = named("agentwire-core", "Turn.cancel")
    assert.strictEqual(turnCancel.parentSpanId, tree.root.spanId)
    const handler = named("agentwire-daemon", "Runtime.prompt_cancel")
    assert.include(ancestors(handler, byId).map((s) => s.spanId), turnCancel.spanId)
    const native = named("agentwire-daemon", "Harness.cancel")
    assert.include(ancestors(native, byId).map((s) => s.spanId), handler.spanId)
    assert.strictEqual(native.attributes["agentwire.wire.type"], "prompt_cancel")
    assert.strictEqual(native.attributes["agentwire.harness.operation"], "cancel")
    assert.strictEqual(named("agentwire-core", "Turn.settle").attributes["agentwire.status"], "cancelled")
    for (const span of tree.trace) {
      for (const value of attributeStrings(span)) assert.notInclude(value, PromptMarker, span.name)
    }

    const after = { core: await scrapeCore(), daemon: await scrapeDaemon() }
    const delta = (side: "core" | "daemon", name: string, labels: Record<string, string> = {}) =>
      sumOf(after[side], name, labels) - sumOf(before[side], name, labels)
    assert.strictEqual(delta("core", "agentwire_core_cancels_total", { outcome: "applied" }), 1)
    assert.strictEqual(delta("core", "agentwire_core_cancels_total"), 1)
    assert.strictEqual(delta("core", "agentwire_core_runs_finished_total", { status: "cancelled" }), 1)
    assert.strictEqual(valueOf(after.core, "agentwire_core_runs_active"), 0)
    assert.strictEqual(delta("daemon", "agentwire_daemon_cancels_total", { outcome: "applied" }), 1)
    assert.strictEqual(delta("daemon", "agentwire_daemon_cancels_total"), 1)
    assert.strictEqual(delta("daemon", "agentwire_daemon_runs_finished_total", { status: "cancelled" }), 1)
    assert.strictEqual(valueOf(after.daemon, "agentwire_daemon_runs_active"), 0)
  }, 60_000)

  it("a failed preparation is counted by outcome and code on both sides", async () => {
    const before = { core: await scrapeCore(), daemon: await scrapeDaemon() }
    const session = await api.post("/sessions", {
      agent_kind: "scripted",
      configuration: { agent_options: { scripted: { prepare: "fail" } } }
    })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const started = await api.post(`/sessions/${session.body.session_id}/turns`, { input: [{ content: [{ type: "input_text", text: "hi" }] }] })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const events = await readSse(core.url, token, started.body.turn_id, async () => {})
    const outcome = JSON.parse(events[events.length - 1]!.data).outcome
    assert.strictEqual(outcome.status, "failed")
    assert.strictEqual(outcome.preparation_error_code, "preparation_failed")
    const after = { core: await scrapeCore(), daemon: await scrapeDaemon() }
    for (const side of ["core", "daemon"] as const) {
      const delta = (name: string, labels: Record<string, string> = {}) => sumOf(after[side], name, labels) - sumOf(before[side], name, labels)
      assert.strictEqual(delta(`agentwire_${side}_admissions_total`, { outcome: "failed", code: "preparation_failed" }), 1, side)
      assert.strictEqual(delta(`agentwire_${side}_admissions_total`), 1, side)
      assert.strictEqual(delta(`agentwire_${side}_runs_started_total`), 0, side)
    }
  }, 60_000)
  it("both processes report their event-loop delay (quantiles 0.5, 0.99, 1) once a 5 s window ended", async () => {
    for (const [side, scrape] of [["core", scrapeCore], ["daemon", scrapeDaemon]] as const) {
      const samples = await eventually(async () => {
        const found = (await scrape()).families.get(`agentwire_${side}_event_loop_delay_seconds`)
        return found !== undefined && found.samples.length === 3 ? found.samples : undefined
      }, 20_000, `${side} event-loop delay`)
      assert.deepStrictEqual(samples.map((s) => s.labels.quantile).sort(), ["0.5", "0.99", "1"])
      for (const sample of samples) assert.isTrue(Number.isFinite(sample.value) && sample.value >= 0, side)
    }
  }, 60_000)
})
