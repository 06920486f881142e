import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import { makeFakeResponses } from "../test/support/fakeResponses.ts"

let threadIdG = ""
const prompt = process.argv[2] ?? "hello"
const extra = process.argv.slice(3)
Effect.runPromise(Effect.scoped(Effect.gen(function* () {
  const fake = yield* makeFakeResponses
  const home = process.env.RHOME ?? Fs.mkdtempSync("/tmp/cxh-")
  const cwd = Fs.mkdtempSync("/tmp/cxw-")
  const t0 = Date.now()
  const child = spawn(process.cwd() + "/node_modules/.bin/codex", ["app-server",
    "-c", `model_providers.fake.name="fake"`, "-c", `model_providers.fake.base_url="${fake.baseUrl}"`,
    "-c", `model_providers.fake.env_key="FAKE_KEY"`, "-c", `model_providers.fake.wire_api="responses"`,
    "-c", `model_providers.fake.request_max_retries=0`, "-c", `model_providers.fake.stream_max_retries=0`,
    "-c", `model_provider="fake"`, "-c", `model="fake-model"`, "-c", `web_search="disabled"`, ...extra], {
    env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, FAKE_KEY: "sk-secret-123" }, cwd, stdio: ["pipe", "pipe", "pipe"] })
  let buf = ""
  const waiters = new Map<number, (v: any) => void>()
  let onNote: (m: any) => void = () => {}
  child.stdout.on("data", (d) => { buf += d; let i; while ((i = buf.indexOf("\n")) >= 0) { const line = buf.slice(0, i); buf = buf.slice(i + 1); const m = JSON.parse(line); console.log(Date.now() - t0, "<<", line.slice(0, 600)); if (m.id !== undefined && m.method === undefined) waiters.get(m.id)?.(m); else onNote(m) } })
  child.stderr.on("data", (d) => console.log("ERR", String(d).slice(0, 300)))
  let id = 0
  const req = (method: string, params: any) => new Promise<any>((r) => { const i = ++id; waiters.set(i, r); child.stdin.write(JSON.stringify({ id: i, method, params }) + "\n") })
  yield* Effect.promise(async () => {
    await req("initialize", { clientInfo: { name: "agentwire", version: "0.1.0" }, capabilities: { experimentalApi: true } })
    child.stdin.write(JSON.stringify({ method: "initialized" }) + "\n")
    const th = process.env.THREAD ? await req("thread/resume", { threadId: process.env.THREAD, cwd, excludeTurns: true }) : await req("thread/start", { cwd, approvalPolicy: "on-request", sandbox: "workspace-write", dynamicTools: [{ name: "lookup", description: "look up", inputSchema: { type: "object", properties: { q: { type: "string" } } } }] })
    const threadId = th.result.thread.id; threadIdG = threadId
    const done = new Promise<void>((r) => { onNote = (m) => {
      if (m.method === "turn/completed") r()
      if (m.id !== undefined && m.method) { if (m.method.includes("requestApproval")) child.stdin.write(JSON.stringify({ id: m.id, result: { decision: "accept" } }) + "\n"); if (m.method === "item/tool/call") child.stdin.write(JSON.stringify({ id: m.id, result: { contentItems: [{ type: "inputText", text: "42" }], success: true } }) + "\n"); if (m.method === "item/tool/requestUserInput") child.stdin.write(JSON.stringify({ id: m.id, result: { answers: { color: { answers: ["Blue"] } } } }) + "\n") }
    } })
    await req("turn/start", { threadId, input: [{ type: "text", text: prompt, text_elements: [] }], clientUserMessageId: "u1" })
    await done
    console.log("TURN MS", Date.now() - t0)
  })
  console.log(JSON.stringify(fake.requests().map(r => ({ auth: r.authorization?.slice(0, 12), tools: r.body.tools?.map((t: any) => t.name ?? t.type), last: r.body.input.slice(-2) })), null, 1).slice(0, 3000))
  child.stdin.end()
  yield* Effect.promise(() => new Promise((r) => child.on("exit", r)))
  console.log("HOME", home, "THREAD", threadIdG); console.log("EXIT", Date.now() - t0, Fs.readdirSync(home))
})))
