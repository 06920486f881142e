/**
 * Serves `ControlRpcs` on `<profile>/agentwire.sock` for the lifetime of the daemon's scope (NDJSON over the
 * socket). At start a stale socket file (left by a daemon that died) is removed, but a socket another live
 * daemon answers on is never touched: that profile is in use. The socket file is made mode 0600 right after
 * listen (the profile directory is 0700 as well) and Node removes it when the server closes.
 */
import { NodeSocketServer } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { RpcSerialization, RpcServer } from "effect/rpc"
import { SocketServer } from "effect/socket"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import { StatusBoard } from "../StatusBoard.js"
import { ControlRpcs } from "./ControlRpcs.js"

/** The control socket could not be served. */
export class ControlSocketUnavailable extends Schema.TaggedError<ControlSocketUnavailable>()("ControlSocketUnavailable", {
  path: Schema.String,
  reason: Schema.Literals(["in_use", "not_a_socket", "listen_failed"])
}) {
  override get message() {
    switch (this.reason) {
      case "in_use":
        return `another agentwire daemon is running with this profile (it answers on ${this.path}); stop it or choose another --profile`
      case "not_a_socket":
        return `${this.path} exists and is not a socket; remove it or choose another --profile`
      case "listen_failed":
        return `cannot listen on ${this.path}`
    }
  }
}

/** Whether something accepts connections on the Unix socket at `path`. */
const answers = (path: string): Promise<boolean> =>
  new Promise((resolve) => {
    const conn = Net.createConnection({ path })
    conn.once("connect", () => {
      conn.destroy()
      resolve(true)
    })
    conn.once("error", () => resolve(false))
  })

/** Removes a stale socket file; fails when a live daemon owns it or the path is something else. */
export const clearStaleSocket = (path: string): Effect.Effect<void, ControlSocketUnavailable> =>
  Effect.tryPromise({
    try: async () => {
      const info = await Fs.lstat(path).catch((e: NodeJS.ErrnoException) => {
        if (e.code === "ENOENT") return undefined
        throw e
      })
      if (info === undefined) return "absent" as const
      if (!info.isSocket()) return "not_a_socket" as const
      if (await answers(path)) return "in_use" as const
      await Fs.rm(path, { force: true })
      return "removed" as const
    },
    catch: () => new ControlSocketUnavailable({ path, reason: "listen_failed" })
  }).pipe(
    Effect.flatMap((state) =>
      state === "in_use" || state === "not_a_socket"
        ? Effect.fail(new ControlSocketUnavailable({ path, reason: state }))
        : state === "removed"
        ? Effect.logInfo("removed a stale status socket").pipe(Effect.annotateLogs({ path }))
        : Effect.void
    )
  )

const handlers = ControlRpcs.toLayer(
  Effect.gen(function* () {
    const board = yield* StatusBoard
    return { Status: () => board.snapshot, Metrics: () => PrometheusMetrics.format() }
  })
)

/**
 * Serves the control API on `path` while the layer's scope is open. Fails with `ControlSocketUnavailable` when
 * the socket cannot be served (another daemon owns it, or listening failed).
 */
export const layer = (path: string): Layer.Layer<never, ControlSocketUnavailable, StatusBoard> => {
  const socketServer = Layer.effect(
    SocketServer.SocketServer,
    Effect.gen(function* () {
      const server = yield* NodeSocketServer.make({ path }).pipe(
        Effect.mapError(() => new ControlSocketUnavailable({ path, reason: "listen_failed" }))
      )
      yield* Effect.tryPromise({
        try: () => Fs.chmod(path, 0o600),
        catch: () => new ControlSocketUnavailable({ path, reason: "listen_failed" })
      })
      return server
    })
  )
  const server = RpcServer.layer(ControlRpcs).pipe(
    Layer.provide(handlers),
    Layer.provide(RpcServer.layerProtocolSocketServer),
    Layer.provide(RpcSerialization.layerNdjson),
    Layer.provide(socketServer)
  )
  return Layer.unwrap(Effect.as(clearStaleSocket(path), server))
}
