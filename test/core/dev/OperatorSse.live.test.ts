/**
 * The keep-alive comments of an operator event stream over a real loopback server: written beside the body
 * stream (OperatorSse.ts `writeBeside`), they arrive between whole events, and nothing is written once the
 * stream ended (the response completes normally).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { type Cause, Context, Effect, Layer, Queue, Stream } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { Agent, createServer, request } from "node:http"
import type { JournalItem } from "../../../src/core/dev/JournalItem.js"
import { KeepAliveComment, makeKeepAlive, sseEvent, writeBeside, writeEvents } from "../../../src/core/dev/OperatorSse.js"

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

  it.live("a Turn's events reach the client with the outcome last, and the connection serves the next request", () =>
    Effect.gen(function* () {
      const entry = (seq: number): JournalItem => ({ _tag: "entry", seq, kind: "frame", type: "delta", bodyJson: `{"n":${seq}}` })
      const outcome: JournalItem = { _tag: "outcome", turn: { turnId: "t" } as unknown as Extract<JournalItem, { _tag: "outcome" }>["turn"] }
      const routes = HttpRouter.use((router) =>
        router.add("GET", "/events", (req) =>
          Effect.gen(function* () {
            // Two batches: the entries, then (a later write) the outcome; the outcome's write waits for the end.
            const items = yield* Queue.unbounded<JournalItem, Cause.Done>()
            yield* Queue.offerAll(items, [entry(1), entry(2)])
            yield* Effect.forkDetach(Effect.andThen(Effect.sleep("5 millis"), Effect.andThen(Queue.offer(items, outcome), Queue.end(items))))
            return HttpServerResponse.stream(Stream.fromEffectDrain(writeEvents(Stream.fromQueue(items), req, "event: error\n\n")), {
              contentType: "text/event-stream"
            })
          })))
      const context = yield* Layer.build(
        HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }).pipe(
          Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" }))
        )
      )
      const server = Context.get(context, HttpServer.HttpServer)
      const url = `${HttpServer.formatAddress(server.address)}/events`
      // One socket for both requests: the second one proves the first left its connection uncorked.
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
      const read = Effect.callback<{ readonly body: string; readonly reused: boolean }, Error>((resume) => {
        const req = request(url, { agent }, (res) => {
          let body = ""
          res.setEncoding("utf8")
          res.on("data", (chunk: string) => {
            body += chunk
          })
          res.on("end", () => resume(Effect.succeed({ body, reused: req.reusedSocket })))
          res.on("error", (e) => resume(Effect.fail(e)))
        })
        req.on("error", (e) => resume(Effect.fail(e)))
        req.end()
      })
      const expected = sseEvent(entry(1)) + sseEvent(entry(2)) + sseEvent(outcome)
      const first = yield* read
      assert.strictEqual(first.body, expected)
      yield* Effect.sleep("20 millis") // the agent takes the socket back after the response ended
      const second = yield* read.pipe(Effect.timeout("5 seconds"))
      assert.strictEqual(second.body, expected)
      assert.isTrue(second.reused)
    }).pipe(Effect.scoped))
})
