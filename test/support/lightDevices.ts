/**
 * Many light scripted devices in one process, for the multi-node end-to-end tests (docs/multi-node.md): each
 * is one real WebSocket to a Core node speaking the wire protocol like a daemon with the `scripted` kind — it
 * declares itself, answers a preparation (`preparing`, `ready`), and on `execution_start` sends `started`,
 * `deltas` deltas and `done`. A device can hold its Runs before `done` (a Turn kept in flight), and
 * reconnects to another node when its socket closes unless it was closed here. Plain `ws`, no daemon process:
 * 200 daemons (each a Node process with a Harness) do not fit a 2-core machine next to three Cores.
 */
import WebSocket from "ws"
import { Ids, Messages, Version } from "../../src/proto/index.js"
import { heartbeat, kind } from "./coreScriptedRuntime.js"

const encode = (message: Messages.RuntimeToCore): string => {
  const encoded = Messages.encodeMessage(message)
  if (encoded._tag === "Failure") throw new Error(`invalid frame ${message.type}`)
  return encoded.success
}

export interface LightDeviceOptions {
  readonly deviceId: string
  readonly credential: string
  /** Deltas per Run (default 5). */
  readonly deltas?: number
}

export class LightDevice {
  readonly deviceId: string
  private readonly credential: string
  private readonly deltas: number
  private socket: WebSocket | undefined
  /** The node URL of the current connection. */
  url: string | undefined
  /** Runs started and not finished while `hold` is set: their `done` is sent by `release`. */
  private readonly held: Array<{ readonly socket: WebSocket; readonly runId: string; next: number }> = []
  hold = false
  /** Preparation request ids by the handle answered for them. */
  private readonly prepared = new Map<string, Ids.PreparationRequestId>()
  /** Where to reconnect when the connection closes without `close()` (none: stay offline). */
  fallback: (() => string) | undefined
  /** Connections opened, in order (node URLs). */
  readonly connections: Array<string> = []

  constructor(options: LightDeviceOptions) {
    this.deviceId = options.deviceId
    this.credential = options.credential
    this.deltas = options.deltas ?? 5
  }

  /** Opens a connection to `url` and declares the device (resolves once the socket is open). */
  connect(url: string): Promise<void> {
    const socket = new WebSocket(
      `${url.replace(/^http/, "ws")}/api/v1/agent-daemon/ws?device_id=${this.deviceId}&version=${Version.ProtocolVersion}`,
      { headers: { authorization: `Bearer ${this.credential}` } }
    )
    this.socket = socket
    this.url = url
    socket.on("message", (data: Buffer) => this.onMessage(socket, data))
    socket.on("close", () => {
      if (this.socket !== socket) return
      this.socket = undefined
      const next = this.fallback?.()
      if (next !== undefined) setTimeout(() => void this.connect(next).catch(() => undefined), 50)
    })
    return new Promise<void>((resolve, reject) => {
      socket.once("open", () => {
        this.connections.push(url)
        socket.send(encode(heartbeat([kind("scripted")])))
        resolve()
      })
      socket.once("error", reject)
    })
  }

  private onMessage(socket: WebSocket, data: Buffer) {
    const decoded = Messages.decodeCoreToRuntime(data.toString("utf8"))
    if (decoded._tag === "Failure") return
    const message = decoded.success
    const send = (m: Messages.RuntimeToCore) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(encode(m))
    }
    if (message.type === "execution_prepare") {
      const handle = Ids.unsafeMake.admissionHandle(`h-${message.id}`)
      this.prepared.set(handle, message.id)
      const executor = Ids.unsafeMake.executorId("executor-1")
      send({ type: "preparation_status", id: message.id, payload: { handle, executor_id: executor, revision: 1, state: "preparing" } })
      send({
        type: "preparation_status",
        id: message.id,
        payload: { handle, executor_id: executor, revision: 2, state: "ready", expires_at: Date.now() + 300_000 }
      })
    } else if (message.type === "execution_start") {
      const runId = message.payload.run_id
      const prepareId = this.prepared.get(message.payload.handle)
      if (prepareId !== undefined) {
        send({
          type: "preparation_status",
          id: prepareId,
          payload: {
            handle: message.payload.handle,
            executor_id: Ids.unsafeMake.executorId("executor-1"),
            revision: 3,
            state: "started",
            run_id: runId
          }
        })
      }
      const half = Math.floor(this.deltas / 2)
      for (let n = 1; n <= half; n++) send({ type: "delta", id: runId, payload: { delta: `d${n}`, sequence: n } })
      if (this.hold) {
        this.held.push({ socket, runId, next: half + 1 })
        return
      }
      for (let n = half + 1; n <= this.deltas; n++) send({ type: "delta", id: runId, payload: { delta: `d${n}`, sequence: n } })
      send({ type: "done", id: runId, payload: { content: "all" } })
    }
  }

  /** Finishes the held Runs (on the connections they started on). */
  release() {
    this.hold = false
    for (const h of this.held.splice(0)) {
      if (h.socket.readyState !== WebSocket.OPEN) continue
      for (let n = h.next; n <= this.deltas; n++) h.socket.send(encode({ type: "delta", id: Ids.unsafeMake.runId(h.runId), payload: { delta: `d${n}`, sequence: n } }))
      h.socket.send(encode({ type: "done", id: Ids.unsafeMake.runId(h.runId), payload: { content: "all" } }))
    }
  }

  /** Closes the connection here (no reconnection). */
  close() {
    const socket = this.socket
    this.socket = undefined
    socket?.terminate()
  }
}
