/**
 * The read side's inbound frame counts (`CoreMetrics.inboundUnsafe`) reach the metric registry once per socket read:
 * at the end of a `ws` socket read (`SocketReads`, bracketed by the gateway's `TrackedWebSocket` parser), in the
 * read's own job, so an idle device's heartbeat queues no microtask (issue 18); elsewhere at the end of the job,
 * as before. Either way a read's frames are never counted one by one, and nothing is lost.
 */
import { Socket } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Metric } from "effect"
import * as CoreMetrics from "../../../src/core/CoreMetrics.js"
import * as SocketReads from "../../../src/core/transport/SocketReads.js"
import { TrackedWebSocket } from "../../../src/core/transport/internal/webSocket.js"

/** One masked client text frame (RFC 6455 §5.2), payload under 126 bytes. */
const textFrame = (text: string): Buffer => {
  const payload = Buffer.from(text, "utf8")
  const mask = [0x11, 0x22, 0x33, 0x44]
  return Buffer.concat([
    Buffer.from([0x81, payload.length | 0x80, ...mask]),
    Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))
  ])
}

/** A fresh registry, and what it holds of the inbound frame and byte counters. */
const registry = () => {
  const context = Context.make(Metric.MetricRegistry, new Map()) as Context.Context<never>
  const frames = Metric.withAttributes(CoreMetrics.frames, { direction: "in" })
  const bytes = Metric.withAttributes(CoreMetrics.frameBytes, { direction: "in" })
  return {
    context,
    counted: () => ({ frames: frames.valueUnsafe(context).count, bytes: bytes.valueUnsafe(context).count })
  }
}

/** A server-side gateway `ws` socket over a TCP socket that never connects (the test emits its reads). */
const trackedSocket = () => {
  const ws = new TrackedWebSocket(null as unknown as string, undefined, { autoPong: true })
  const socket = new Socket()
  ;(ws as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket(socket, Buffer.alloc(0), {
    maxPayload: 4 * 1024 * 1024
  })
  return { ws, read: (chunk: Buffer) => void socket.emit("data", chunk) }
}

describe("inbound frame counts at the end of a socket read", () => {
  it.effect("a ws socket read's frames are counted once, when the read's frames are handed over, in the same job", () =>
    Effect.sync(() => {
      const { context, counted } = registry()
      const count = new CoreMetrics.InboundCount(context)
      const { read, ws } = trackedSocket()
      const seenDuringRead: Array<number> = []
      ws.on("message", (data: Buffer) => {
        CoreMetrics.inboundUnsafe(count, data.length)
        seenDuringRead.push(counted().frames)
      })
      const texts = ["a", "bb", `{"type":"heartbeat","payload":{"ts":1}}`]
      const firstBytes = texts.reduce((n, t) => n + t.length, 0)
      read(Buffer.concat(texts.map(textFrame)))
      // Not one by one during the read, all of them right after it (no microtask has run yet).
      assert.deepStrictEqual(seenDuringRead, [0, 0, 0])
      assert.deepStrictEqual(counted(), { frames: 3, bytes: firstBytes })
      // One frame per read, as an idle device's heartbeats come: each read is counted at its end.
      for (let i = 1; i <= 50; i++) {
        read(textFrame("x".repeat(i)))
        assert.strictEqual(counted().frames, 3 + i)
      }
      assert.strictEqual(counted().bytes, firstBytes + (50 * 51) / 2)
    }))

  it.effect("outside a socket read, counts wait for the end of the job and none is lost", () =>
    Effect.gen(function*() {
      const { context, counted } = registry()
      const one = new CoreMetrics.InboundCount(context)
      const two = new CoreMetrics.InboundCount(context)
      CoreMetrics.inboundUnsafe(one, 10)
      CoreMetrics.inboundUnsafe(two, 5)
      CoreMetrics.inboundUnsafe(one, 1)
      assert.deepStrictEqual(counted(), { frames: 0, bytes: 0 })
      yield* Effect.promise(() => Promise.resolve())
      assert.deepStrictEqual(counted(), { frames: 3, bytes: 16 })
      // Counted outside a read, then a read in the same job: the job's end counts both.
      CoreMetrics.inboundUnsafe(one, 7)
      const { read, ws } = trackedSocket()
      ws.on("message", (data: Buffer) => CoreMetrics.inboundUnsafe(two, data.length))
      read(textFrame("abc"))
      yield* Effect.promise(() => Promise.resolve())
      assert.deepStrictEqual(counted(), { frames: 5, bytes: 26 })
    }))

  it.effect("work queued for a read's end runs once, at the outermost end, in order; none outside a read", () =>
    Effect.sync(() => {
      const ran: Array<string> = []
      assert.isFalse(SocketReads.atReadEnd(() => ran.push("outside")))
      SocketReads.begin()
      assert.isTrue(SocketReads.atReadEnd(() => ran.push("a")))
      SocketReads.begin()
      assert.isTrue(SocketReads.atReadEnd(() => ran.push("b")))
      SocketReads.end()
      assert.deepStrictEqual(ran, [])
      SocketReads.end()
      assert.deepStrictEqual(ran, ["a", "b"])
      SocketReads.begin()
      SocketReads.end()
      assert.deepStrictEqual(ran, ["a", "b"])
      assert.isFalse(SocketReads.atReadEnd(() => ran.push("after")))
      assert.deepStrictEqual(ran, ["a", "b"])
    }))
})
