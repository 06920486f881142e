/**
 * The in-memory line channel the Codex JSON-RPC tests share (test/runtime/harness/codex/): Codex's stdout is a
 * queue the test offers lines to, its stdin a queue of the parsed lines the client wrote, and the pipe can be
 * broken. `connected` is the common setup: a channel and a client reading it (in the test's Scope).
 */
import { type Cause, Effect, Queue } from "effect"
import { makeRpcClient } from "../../src/runtime/harness/codex/CodexRpc.js"

export const channel = Effect.gen(function* () {
  const lines = yield* Queue.unbounded<string, Cause.Done>()
  const written = yield* Queue.unbounded<Record<string, unknown>>()
  let broken = false
  return {
    lines,
    written,
    breakPipe: () => {
      broken = true
    },
    writeLine: (line: string) =>
      broken ? Effect.fail({ _tag: "WriteFailed" }) : Effect.asVoid(Queue.offer(written, JSON.parse(line) as Record<string, unknown>))
  }
})

export const connected = Effect.gen(function* () {
  const ch = yield* channel
  const rpc = yield* makeRpcClient(ch)
  return { ch, rpc }
})
