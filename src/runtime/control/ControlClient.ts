/**
 * The client side of the control API, used by `agentwire status`. It connects to `<profile>/agentwire.sock`,
 * asks once and disconnects. Reading a snapshot changes nothing in the daemon.
 */
import { NodeSocket } from "@effect/platform-node"
import { Duration, Effect, Layer, Schema } from "effect"
import { RpcClient, type RpcClientError, RpcSerialization } from "effect/rpc"
import * as Fs from "node:fs/promises"
import type { StatusSnapshot } from "../StatusBoard.js"
import { ControlRpcs } from "./ControlRpcs.js"

/** How long `status` waits for the daemon's answer. */
export const StatusTimeout: Duration.Duration = Duration.seconds(5)

/** No daemon answered on the socket. */
export class DaemonUnreachable extends Schema.TaggedError<DaemonUnreachable>()("DaemonUnreachable", {
  path: Schema.String,
  reason: Schema.Literals(["no_socket", "not_answering", "timeout"])
}) {
  override get message() {
    switch (this.reason) {
      case "no_socket":
        return `no agentwire daemon is running for this profile (no socket at ${this.path})`
      case "not_answering":
        return `no agentwire daemon answers on ${this.path} (a stale socket?)`
      case "timeout":
        return `the daemon on ${this.path} did not answer within ${Duration.format(StatusTimeout)}`
    }
  }
}

/** Asks the daemon behind `path` once (connect, call, disconnect). */
const ask = <A>(
  path: string,
  call: (client: RpcClient.FromGroup<typeof ControlRpcs, RpcClientError.RpcClientError>) => Effect.Effect<A, unknown>
): Effect.Effect<A, DaemonUnreachable> =>
  Effect.scoped(
    Effect.gen(function* () {
      const exists = yield* Effect.promise(() => Fs.lstat(path).then((s) => s.isSocket(), () => false))
      if (!exists) return yield* new DaemonUnreachable({ path, reason: "no_socket" })
      // Built in this scope (not with Effect.provide): the protocol must outlive RpcClient.make.
      const protocol = yield* Layer.build(
        RpcClient.layerProtocolSocket({ retryTransientErrors: false }).pipe(
          Layer.provide(NodeSocket.layerNet({ path })),
          Layer.provide(RpcSerialization.layerNdjson)
        )
      ).pipe(Effect.mapError(() => new DaemonUnreachable({ path, reason: "not_answering" })))
      const client = yield* RpcClient.make(ControlRpcs).pipe(Effect.provide(protocol))
      return yield* call(client).pipe(
        Effect.mapError(() => new DaemonUnreachable({ path, reason: "not_answering" })),
        Effect.timeoutOrElse({
          duration: StatusTimeout,
          orElse: () => Effect.fail(new DaemonUnreachable({ path, reason: "timeout" }))
        })
      )
    })
  )

/** Asks the daemon behind `path` for its status snapshot. */
export const status = (path: string): Effect.Effect<StatusSnapshot, DaemonUnreachable> => ask(path, (client) => client.Status())

/** Asks the daemon behind `path` for its metrics (Prometheus text format). */
export const metrics = (path: string): Effect.Effect<string, DaemonUnreachable> => ask(path, (client) => client.Metrics())
