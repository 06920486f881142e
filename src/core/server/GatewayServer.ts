/**
 * A standalone HTTP server for the machine routes alone (tests, embedding, the bench): a Node HTTP server on
 * `host:port` (port 0 picks a free one) with the WebSocket frame bound, the gateway, and the routes. The dev
 * Core mounts `GatewayHttp.layer` beside its operator API instead.
 *
 * Teardown order: the gateway shuts down first (every session ends with `gateway_shutdown` and its socket is
 * closed), then the HTTP server stops, so closing the server never waits on live Runtime connections.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, type HttpServerError } from "effect/http"
import type { DeviceCredentials } from "../DeviceCredentials.js"
import { Gateway } from "../Gateway.js"
import { GatewayConfig, type GatewayConfigInvalid, type GatewayConfigOptions, makeConfig } from "../GatewayConfig.js"
import * as GatewayHttp from "./GatewayHttp.js"
import { type ConnectionLimits, createGuardedServer } from "../transport/internal/connectionGuard.js"

export interface GatewayServerOptions extends Partial<Omit<GatewayConfigOptions, "publicUrl">> {
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
  /** Core's public base URL for `ws_url`; defaults to `http://<host>:<bound port>`. */
  readonly publicUrl?: string
  /** Header, request and pending-connection bounds (defaults: `defaultConnectionLimits`). */
  readonly connectionLimits?: Partial<ConnectionLimits>
}

export interface GatewayServerShape {
  readonly host: string
  /** The bound port. */
  readonly port: number
  /** `http://host:port` of the bound server. */
  readonly baseUrl: string
  /** The `ws_url` bootstrap returns. */
  readonly wsUrl: string
}

export class GatewayServer extends Context.Service<GatewayServer, GatewayServerShape>()("agentwire/core/GatewayServer") {
  /**
   * Serves the machine routes. Provides the bound address (`GatewayServer`), the `Gateway`, its
   * `GatewayConfig` and the `HttpServer`. Fails with `ServeError` when the port cannot be bound and with
   * `GatewayConfigInvalid` for an unusable public URL.
   */
  static readonly layer = (
    options: GatewayServerOptions
  ): Layer.Layer<
    GatewayServer | Gateway | GatewayConfig | HttpServer.HttpServer,
    HttpServerError.ServeError | GatewayConfigInvalid,
    DeviceCredentials
  > => {
    const server = NodeHttpServer.layer(() => createGuardedServer(options.connectionLimits), {
      host: options.host,
      port: options.port,
      websocket: GatewayHttp.websocketServerOptions
    })
    const config = Layer.effect(
      GatewayConfig,
      Effect.gen(function*() {
        const http = yield* HttpServer.HttpServer
        const port = http.address._tag === "UnixPathAddress" ? options.port : http.address.port
        const { connectionLimits: _limits, host: _host, port: _port, publicUrl, ...rest } = options
        return yield* Effect.fromResult(makeConfig({ ...rest, publicUrl: publicUrl ?? `http://${options.host}:${port}` }))
      })
    )
    const routes = HttpRouter.serve(GatewayHttp.layer, { disableListenLog: true })
    const shutdownFirst = Layer.effectDiscard(
      Effect.gen(function*() {
        const gateway = yield* Gateway
        yield* Effect.addFinalizer(() => gateway.shutdown)
      })
    )
    const info = Layer.effect(
      GatewayServer,
      Effect.gen(function*() {
        const http = yield* HttpServer.HttpServer
        const gatewayConfig = yield* GatewayConfig
        const port = http.address._tag === "UnixPathAddress" ? options.port : http.address.port
        return GatewayServer.of({
          host: options.host,
          port,
          baseUrl: `http://${options.host}:${port}`,
          wsUrl: gatewayConfig.wsUrl
        })
      })
    )
    return Layer.mergeAll(shutdownFirst, info).pipe(
      Layer.provideMerge(routes),
      Layer.provideMerge(Gateway.layer),
      Layer.provideMerge(config),
      Layer.provideMerge(server)
    )
  }
}
