/**
 * The keep-alive comments of an operator event stream over a real loopback server: written beside the body
 * stream (OperatorSse.ts `writeBeside`), they arrive between whole events, and nothing is written once the
 * stream ended (the response completes normally).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type Cause, Context, Effect, Layer, Queue, Stream } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { createServer, request } from "node:http"
import { KeepAliveComment, makeKeepAlive, writeBeside } from "../../../src/core/dev/OperatorSse.js"

describe("OperatorSse (live)", () => {
  it.live("keep-alive comments reach the client between whole events, and none after the stream ended", () =>
    Effect.gen(function* () {
      const keepAlive = yield* makeKeepAlive("20 millis")
      const events = yield* Queue.unbounded<string, Cause.Done>()
      const routes = HttpRouter.use((router) =>
        router.add("GET", "/events", (req) =>
          Effect.succeed(HttpServerResponse.stream(
            Stream.fromEffectDrain(keepAlive.around(
              Stream.fromQueue(events).pipe(Stream.runForEach((text) => Effect.sync(() => writeBeside(req)(text)))),
              writeBeside(req)
            )),
            { contentType: "text/event-stream" }
          ))))
      const context = yield* Layer.build(
        HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
          Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" }))
        )
      )
      const server = Context.get(context, HttpServer.HttpServer)
      const url = `${HttpServer.formatAddress(server.address)}/events`

      yield* Queue.offer(events, "event: frame\ndata: {\"a\":1}\n\n")
      // The client reads until it has seen two keep-alive comments; the test then ends the events.
      const body = yield* Effect.callback<string, Error>((resume) => {
        let text = ""
        let ended = false
        const req = request(url, (res) => {
          res.setEncoding("utf8")
          res.on("data", (chunk: string) => {
            text += chunk
            if (!ended && text.split(KeepAliveComment).length - 1 >= 2) {
              ended = true
              Effect.runFork(Effect.andThen(Queue.offer(events, "event: outcome\ndata: {}\n\n"), Queue.end(events)))
            }
          })
          res.on("end", () => resume(Effect.succeed(text)))
          res.on("error", (e) => resume(Effect.fail(e)))
        })
        req.on("error", (e) => resume(Effect.fail(e)))
        req.end()
      })
      const parts = body.split("\n\n").filter((p) => p !== "")
      assert.strictEqual(parts[0], "event: frame\ndata: {\"a\":1}")
      assert.strictEqual(parts[parts.length - 1], "event: outcome\ndata: {}")
      const comments = parts.slice(1, -1)
      assert.isAtLeast(comments.length, 2)
      for (const comment of comments) assert.strictEqual(`${comment}\n\n`, KeepAliveComment)
    }).pipe(Effect.scoped))
})
