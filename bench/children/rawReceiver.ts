/**
 * Child role `raw-receiver`: the receiving end of the relay suite's raw `ws` baselines in a process of its own
 * (`startRawServer`: the same server, frame bound and receiver work as before), so the Core gateway's garbage,
 * collected in the bench process, never lands in a raw round and the raw receiver's never in a daemon round. The
 * sender is a `runtime-peer` child of its own (raw only); the daemon runs in a third child.
 *
 * Commands over IPC: `burst` (`batch` given: the daemon's batching, else one write per frame) replies with the
 * receive times of the first and last frame (this process's clock); `cpu` with this process's CPU time so far.
 */
import { type RawServer, startRawServer } from "../support/rawServer.js"

export type RawReceiverCommand =
  | { readonly op: "burst"; readonly n: number; readonly runId: string; readonly text: string; readonly batch?: number }
  | { readonly op: "cpu" }
  | { readonly op: "exit" }

export type RawReceiverReply =
  | { readonly op: "listening"; readonly url: string }
  | { readonly op: "connected" }
  | { readonly op: "burst"; readonly first: number; readonly last: number }
  | { readonly op: "cpu"; readonly micros: number }
  | { readonly op: "error"; readonly message: string }

const reply = (message: RawReceiverReply) => process.send?.(message)

export const rawReceiver = async (): Promise<void> => {
  const raw: RawServer = await startRawServer()
  process.on("message", (message: RawReceiverCommand) => {
    switch (message.op) {
      case "burst": {
        const done = message.batch === undefined
          ? raw.burst(message.n, message.runId, message.text)
          : raw.burstBatched(message.n, message.runId, message.text, message.batch)
        done.then(
          (b) => reply({ op: "burst", first: b.first, last: b.last }),
          (e: unknown) => reply({ op: "error", message: String(e) })
        )
        return
      }
      case "cpu": {
        const cpu = process.cpuUsage()
        reply({ op: "cpu", micros: cpu.user + cpu.system })
        return
      }
      case "exit":
        raw.close().finally(() => process.exit(0))
        return
    }
  })
  process.on("disconnect", () => process.exit(0))
  reply({ op: "listening", url: raw.url })
  await raw.connected
  reply({ op: "connected" })
  await new Promise<never>(() => {})
}
