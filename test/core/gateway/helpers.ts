/**
 * Shared helpers of the gateway tests: the in-memory gateway layer, stream collection, a read-loop barrier
 * and a log capture.
 */
import { Effect, Exit, Layer, Logger, References, Stream } from "effect"
import { Gateway } from "../../../src/core/Gateway.js"
import { GatewayConfig, type GatewayConfigOptions } from "../../../src/core/GatewayConfig.js"
import { frames, type MemoryConnection, runId } from "../../support/coreScriptedRuntime.js"

/** The gateway with its config (public URL `http://core.test` unless overridden). */
export const gatewayLayer = (overrides: Partial<GatewayConfigOptions> = {}) =>
  Gateway.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test", ...overrides })))

/** Runs a stream to its end and returns what it emitted and how it ended. */
export const collect = <A, E>(stream: Stream.Stream<A, E>) =>
  Effect.gen(function*() {
    const items: Array<A> = []
    const exit = yield* Effect.exit(Stream.runForEach(stream, (a) => Effect.sync(() => void items.push(a))))
    return { items, exit }
  })

let barriers = 0
/**
 * Returns once the session's read loop handled every frame the runtime sent before this call (frames are
 * routed in order, so a done for a fresh Run proves it).
 */
export const settle = (connection: MemoryConnection) =>
  Effect.scoped(Effect.gen(function*() {
    const id = `barrier-${++barriers}`
    const stream = yield* connection.session.subscribeDurable(runId(id))
    yield* connection.runtime.send(frames.done(id))
    yield* Stream.runDrain(stream)
  }))

/** Every log line (message and annotations, formatted) at every level, for secret and payload checks. */
export const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make((options) => {
    lines.push(JSON.stringify({
      level: options.logLevel,
      message: options.message,
      annotations: options.fiber.getRef(References.CurrentLogAnnotations),
      cause: String(options.cause)
    }))
  })
  const layer = Layer.merge(Logger.layer([logger]), Layer.succeed(References.MinimumLogLevel, "All"))
  return { lines, layer }
}

export const isSuccess = Exit.isSuccess
