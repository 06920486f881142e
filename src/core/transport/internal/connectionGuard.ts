/**
 * Bounds on unauthenticated connections to Core's HTTP server (issue #17: 1,100 idle sockets exhausted a Core
 * limited to 1,024 file descriptors, and Node's defaults held an idle or slow-header socket 90 s and a
 * trickling body 330 s).
 *
 * - Header timeout: a connection must deliver a request's complete headers within `headersTimeout` (10 s) of
 *   its start, idle keep-alive time included; Node then answers 408 and closes it. This is also the idle
 *   timeout before a WebSocket upgrade.
 * - Request timeout: the whole request, body included, must arrive within `requestTimeout` (20 s).
 * - Node checks both every `checkInterval` (1 s), so a socket outlives its budget by at most that.
 * - Pending cap: at most `maxPendingConnections` (256) connections are open without having authenticated. A
 *   new connection beyond the cap evicts the oldest pending one (destroyed at once), so a flood of idle sockets
 *   cannot keep a fresh bootstrap or operator request out for longer than it takes to send it.
 * - Reserve: a connection leaves the pending set once a route authenticates it (`markAuthenticated`: an
 *   upgraded daemon WebSocket, an authorized operator request), so authenticated work is never evicted and
 *   the descriptors beyond the cap stay available to it.
 *
 * Closing the server destroys the pending connections at once instead of waiting for them.
 *
 * The bounds are options of the server factory; the defaults are the documented values (docs/gateway.md).
 */
import { Duration } from "effect"
import type { HttpServerRequest } from "effect/http"
import { EventEmitter } from "node:events"
import { createServer, type Server } from "node:http"
import type { Socket } from "node:net"

export interface ConnectionLimits {
  /** Time from a connection's start (or its previous response) to a request's complete headers. */
  readonly headersTimeout: Duration.Duration
  /** Time from a request's start to its complete body. */
  readonly requestTimeout: Duration.Duration
  /** How often Node checks both timeouts. */
  readonly checkInterval: Duration.Duration
  /** Connections open at once without authentication; a new one beyond this evicts the oldest. */
  readonly maxPendingConnections: number
}

export const defaultConnectionLimits: ConnectionLimits = {
  headersTimeout: Duration.seconds(10),
  requestTimeout: Duration.seconds(20),
  checkInterval: Duration.seconds(1),
  maxPendingConnections: 256
}

/** The pending set of the server that accepted each socket. */
const pendingOf = new WeakMap<Socket, Set<Socket>>()

/** A Node HTTP server with the bounds above. */
export const createGuardedServer = (limits: Partial<ConnectionLimits> = {}): Server => {
  const resolved = { ...defaultConnectionLimits, ...limits }
  const headersTimeout = Duration.toMillis(resolved.headersTimeout)
  const server = createServer({
    headersTimeout,
    // Node requires the request timeout to be at least the headers timeout.
    requestTimeout: Math.max(headersTimeout, Duration.toMillis(resolved.requestTimeout)),
    connectionsCheckingInterval: Math.max(1, Duration.toMillis(resolved.checkInterval))
  })
  const pending = new Set<Socket>()
  server.on("connection", (socket: Socket) => {
    while (pending.size >= resolved.maxPendingConnections) {
      const oldest = pending.values().next().value
      if (oldest === undefined) break
      pending.delete(oldest)
      oldest.destroy()
    }
    pending.add(socket)
    pendingOf.set(socket, pending)
    socket.once("close", () => pending.delete(socket))
  })
  recordUpgradeListeners(server)
  // Closing the server never waits on a connection that has not authenticated (Node would wait for each to
  // end by itself): they are destroyed first, then the server closes as usual.
  const close = server.close.bind(server)
  server.close = ((callback?: (error?: Error) => void) => {
    for (const socket of pending) socket.destroy()
    pending.clear()
    return close(callback)
  }) as typeof server.close
  return server
}

/** Marks the request's connection as authenticated: it no longer counts as pending and is never evicted. */
export const markAuthenticated = (request: HttpServerRequest.HttpServerRequest): void => {
  // A Node request's source is its IncomingMessage; any other server (in memory) has nothing to track.
  const source = request.source as { readonly socket?: unknown } | null | undefined
  const socket = typeof source === "object" && source !== null ? source.socket : undefined
  if (typeof socket === "object" && socket !== null) pendingOf.get(socket as Socket)?.delete(socket as Socket)
}

type SocketEvent = "close" | "error"

/** The `close` and `error` listeners the HTTP layer's upgrade handler added to each upgraded socket. */
const upgradeListeners = new WeakMap<Socket, ReadonlyArray<readonly [SocketEvent, (...args: Array<unknown>) => void]>>()

/**
 * The platform's upgrade handler (effect's NodeHttpServer) starts the request's fiber and then, before it
 * returns, adds a `close` listener (interrupting that fiber) and an `error` no-op to the TCP socket. Both close
 * over the handler's scope: the fiber, its context, the Node request and the upgrade state. The last `close` and
 * `error` listener each `upgrade` emit added are recorded here, so a route that keeps the connection without the
 * fiber can release them (`releaseUpgradeListeners`); `ws`'s own listeners are never recorded.
 */
const recordUpgradeListeners = (server: Server): void => {
  const emit = server.emit
  server.emit = function(this: Server, event: string | symbol, ...args: Array<unknown>): boolean {
    const socket = args[1]
    if (event !== "upgrade" || !(socket instanceof EventEmitter)) return Reflect.apply(emit, this, [event, ...args]) as boolean
    const before = { close: socket.listeners("close"), error: socket.listeners("error") }
    const result = Reflect.apply(emit, this, [event, ...args]) as boolean
    const added: Array<readonly [SocketEvent, (...args: Array<unknown>) => void]> = []
    for (const type of ["close", "error"] as const) {
      const now = socket.listeners(type)
      const last = now[now.length - 1] as ((...args: Array<unknown>) => void) | undefined
      if (last !== undefined && !before[type].includes(last) && !wsOwn.has(last.name)) added.push([type, last])
    }
    if (added.length > 0) upgradeListeners.set(socket as Socket, added)
    return result
  } as typeof server.emit
}

/** `ws`'s socket listeners, which the connection needs until it ends. */
const wsOwn = new Set(["socketOnClose", "socketOnError"])

/**
 * Releases the upgrade handler's listeners on the request's socket (see `recordUpgradeListeners`) at the end of
 * the current synchronous run, when the `upgrade` emit has returned. Call it only when the route's fiber ends
 * with the connection handed over (a `ws` transport): those listeners would otherwise keep the finished request's
 * scope alive for the connection's lifetime (2-3 KiB per idle device that every major GC marks, issue 18).
 * `ws` keeps its own `close` and `error` listeners, so the connection still ends and an error is never unhandled.
 */
export const releaseUpgradeListeners = (request: HttpServerRequest.HttpServerRequest): void => {
  const source = request.source as { readonly socket?: unknown } | null | undefined
  const socket = typeof source === "object" && source !== null ? source.socket : undefined
  if (!(socket instanceof EventEmitter)) return
  queueMicrotask(() => {
    const added = upgradeListeners.get(socket as Socket)
    upgradeListeners.delete(socket as Socket)
    for (const [type, listener] of added ?? []) socket.removeListener(type, listener)
  })
}
