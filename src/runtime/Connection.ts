/**
 * STUB (to be replaced by the per-connection implementation; keep the exported names and types).
 *
 * One physical connection's logic: builds the per-connection services (routing, admission handles, transfer
 * state), sends the heartbeat at once and then on schedule, and consumes `Transport.inbound` until it ends.
 * It is one `Effect.scoped`: it returns only after every resource of this connection has confirmed cleanup,
 * so the daemon loop after it can never race owned resources.
 */
import { Effect, Stream } from "effect"
import type { RuntimeProcessServices } from "./RuntimeProcess.js"
import { StatusBoard } from "./StatusBoard.js"
import { ConnectionInfo, Transport, TransportClosed, TransportClosed as TransportClosedError } from "./transport/Transport.js"

/** How a connection ended. Returned only after its cleanup confirmed. */
export type ConnectionEnd =
  | { readonly _tag: "TransportEnded"; readonly error: TransportClosed }
  | { readonly _tag: "ShutdownRequested" } // device_shutdown: drained and cleaned up; the daemon exits 0

export const run: Effect.Effect<
  ConnectionEnd,
  never,
  Transport | ConnectionInfo | StatusBoard | RuntimeProcessServices
> = Effect.gen(function* () {
  const transport = yield* Transport
  yield* ConnectionInfo
  yield* StatusBoard
  return yield* Stream.runDrain(transport.inbound).pipe(
    Effect.match({
      onFailure: (error): ConnectionEnd => ({ _tag: "TransportEnded", error }),
      onSuccess: (): ConnectionEnd => ({ _tag: "TransportEnded", error: new TransportClosedError({ reason: "closed_by_peer" }) })
    })
  )
})
