/**
 * A scripted device over a real WebSocket for the "fast Turn" end-to-end tests (issue #17): it declares the
 * `scripted` kind, answers a Turn's preparation, then sends `started`, `count` deltas (about 1 KiB each) and
 * `done` as fast as its socket takes them. Plain `ws`, no daemon: the burst is what a talkative engine sends.
 */
import { request as httpRequest } from "node:http"
import WebSocket from "ws"
import { Ids, Messages, Version } from "../../src/proto/index.js"
import { heartbeat, kind } from "./coreScriptedRuntime.js"
import { eventually, type operator, text } from "./devcoreLive.js"

const encode = (message: Messages.RuntimeToCore): string => {
  const encoded = Messages.encodeMessage(message)
  if (encoded._tag === "Failure") throw new Error(`invalid frame ${message.type}`)
  return encoded.success
}

const Filler = "x".repeat(1000)

export interface FastDevice {
  /** Starts a Turn on the Session and plays it; resolves with its id and outcome once terminal. */
  readonly fastTurn: (
    sessionId: string,
    count: number,
    onStarted?: (turnId: string) => void
  ) => Promise<{ readonly turnId: string; readonly outcome: any }>
  readonly close: () => void
}

export const connectFastDevice = async (
  coreUrl: string,
  deviceId: string,
  credential: string,
  api: ReturnType<typeof operator>
): Promise<FastDevice> => {
  const inbox: Array<Messages.CoreToRuntime> = []
  const waiters: Array<(m: Messages.CoreToRuntime) => void> = []
  const device = new WebSocket(
    `${coreUrl.replace(/^http/, "ws")}/api/v1/agent-daemon/ws?device_id=${deviceId}&version=${Version.ProtocolVersion}`,
    { headers: { authorization: `Bearer ${credential}` } }
  )
  device.on("message", (data: Buffer) => {
    const decoded = Messages.decodeCoreToRuntime(data.toString("utf8"))
    if (decoded._tag === "Failure") return
    const waiter = waiters.shift()
    if (waiter !== undefined) waiter(decoded.success)
    else inbox.push(decoded.success)
  })
  await new Promise<void>((resolve, reject) => {
    device.once("open", () => resolve())
    device.once("error", reject)
  })
  device.send(encode(heartbeat([kind("scripted")])))
  await eventually(async () => {
    const found = await api.get(`/devices/${deviceId}`)
    return found.body?.online === true && found.body.declaration !== null ? true : undefined
  }, 20_000, `${deviceId} online with a declaration`)

  const next = (): Promise<Messages.CoreToRuntime> =>
    inbox.length > 0 ? Promise.resolve(inbox.shift()!) : new Promise((resolve) => waiters.push(resolve))
  const nextOf = async <T extends Messages.CoreToRuntimeType>(type: T): Promise<Messages.MessageOfType<T>> => {
    while (true) {
      const message = await next()
      if (message.type === type) return message as Messages.MessageOfType<T>
    }
  }

  const fastTurn: FastDevice["fastTurn"] = async (sessionId, count, onStarted = () => undefined) => {
    const started = await api.post(`/sessions/${sessionId}/turns`, { input: text("go") })
    if (started.status !== 202) throw new Error(`turn start answered ${started.status}`)
    const turnId = started.body.turn_id as string
    const prepare = await nextOf("execution_prepare")
    const handle = Ids.unsafeMake.admissionHandle("handle-1")
    const executor = Ids.unsafeMake.executorId("executor-1")
    const status = (payload: Messages.MessageOfType<"preparation_status">["payload"]) =>
      device.send(encode({ type: "preparation_status", id: prepare.id, payload }))
    status({ handle, executor_id: executor, revision: 1, state: "preparing" })
    status({ handle, executor_id: executor, revision: 2, state: "ready", expires_at: Date.now() + 300_000 })
    const start = await nextOf("execution_start")
    const runId = start.payload.run_id
    onStarted(turnId)
    status({ handle, executor_id: executor, revision: 3, state: "started", run_id: runId })
    for (let n = 1; n <= count; n++) {
      device.send(encode({ type: "delta", id: runId, payload: { delta: `d${n} ${Filler}`, sequence: n } }))
    }
    device.send(encode({ type: "done", id: runId, payload: { content: "all" } }))
    const outcome = await eventually(async () => {
      const turn = await api.get(`/turns/${turnId}`)
      return turn.body?.outcome ?? undefined
    }, 240_000, "the fast Turn's outcome")
    return { turnId, outcome }
  }

  return { fastTurn, close: () => device.terminate() }
}

/** Opens a Turn's event stream and never reads a byte of it; returns how to drop it. */
export const stalledSseClient = (coreUrl: string, token: string, turnId: string): (() => void) => {
  const stalled = httpRequest(`${coreUrl}/api/v1/operator/turns/${turnId}/events`, { headers: { authorization: `Bearer ${token}` } })
  stalled.on("response", (res) => res.pause())
  stalled.on("error", () => undefined)
  stalled.end()
  return () => stalled.destroy()
}
