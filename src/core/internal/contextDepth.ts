/**
 * How deep a fiber's services may be stacked before Effect copies them (issue 18, "ctxdepth"). An Effect `Context`
 * keeps the services added on top of a shared map as a chain and, once the chain is `maxDepth` long (8 by default),
 * copies the whole map into a new one for the next addition. The dev Core's request and Turn fibers stack more than
 * 8: an HTTP request adds six (request, route, search parameters, request state, two scopes), then every span adds
 * its stack frame and parent span, log annotations add one, a scope one. Each Turn copied the dev Core's 32–39
 * services about six times (≈ 38 KB of its ≈ 434 KB allocated on the main thread).
 */
import { Context, Effect, Layer, type Scope } from "effect"

/** The chain length the dev Core's fibers keep before a copy: a lookup walks at most this many entries first. */
export const DevCoreContextDepth = 32

/**
 * `layer` built in a context whose chains may be `maxDepth` long: every fiber the layer forks or serves from
 * (HTTP requests, Turn runners) inherits the depth, as every context derived from another one does.
 */
export const withContextDepth = (maxDepth: number) => <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.effectContext(
    Effect.updateContext(Layer.build(layer), (context: Context.Context<R | Scope.Scope>) => Context.makeUnsafe<R | Scope.Scope>(context.mapUnsafe, { maxDepth }))
  )
