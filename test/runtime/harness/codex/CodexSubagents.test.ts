/**
 * Sub-agent observations of a Codex Turn (CodexSubagents.ts), driven through the Turn with the notification
 * sequence the pinned 0.171.0 app-server sent for a `multi_agent_v1.spawn_agent` call followed by `wait_agent`
 * (recorded against the fake Responses server, trimmed to the fields read). With `observe_subagent_identities`
 * the child becomes `subagent_*` events (identity first); without it, nothing of the child reaches the Run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import type { PromptRequestPayload } from "../../../../src/proto/Execution.js"
import { unsafeMake } from "../../../../src/proto/Ids.js"
import type { TurnEvent } from "../../../../src/runtime/harness/Harness.js"
import type { Incoming } from "../../../../src/runtime/harness/codex/CodexRpc.js"
import { coordinationKind, snake } from "../../../../src/runtime/harness/codex/CodexSubagents.js"
import { makeCodexTurn } from "../../../../src/runtime/harness/codex/CodexTurn.js"
import { connected } from "../../../support/codexRpcChannel.js"

const root = "thread-root"
const child = "thread-child"
const rootTurn = "turn-root"
const childTurn = "turn-child"
const zero = { totalTokens: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0 }
const usage = (total: number, last: number) => ({
  total: { totalTokens: total, inputTokens: total - 20, cachedInputTokens: 10, outputTokens: 20, reasoningOutputTokens: 5 },
  last: { totalTokens: last, inputTokens: last - 20, cachedInputTokens: 10, outputTokens: 20, reasoningOutputTokens: 5 }
})
const note = (method: string, params: unknown): Incoming => ({ _tag: "Notification", method, params })
const collab = (id: string, tool: string, status: string, receivers: ReadonlyArray<string>, states: Record<string, string>, at: number) => ({
  type: "collabAgentToolCall",
  id,
  tool,
  status,
  senderThreadId: root,
  receiverThreadIds: receivers,
  prompt: tool === "spawnAgent" ? "CHILD do the thing" : null,
  model: tool === "spawnAgent" ? "fake-model" : null,
  reasoningEffort: tool === "spawnAgent" ? "medium" : null,
  agentsStates: Object.fromEntries(Object.entries(states).map(([k, v]) => [k, { status: v, message: null }])),
  startedAtMs: at,
  completedAtMs: status === "inProgress" ? null : at + 5
})
const rootItem = (method: string, item: unknown) => note(method, { threadId: root, turnId: rootTurn, item })
const childItem = (method: string, item: unknown) => note(method, { threadId: child, turnId: childTurn, item })
const message = { type: "agentMessage", id: "msg_3", text: "echo: CHILD do the thing", phase: null }

/** The recorded sequence (0.171.0): spawn, the child's turn with one message and usage, wait, root text. */
const recorded: ReadonlyArray<Incoming> = [
  rootItem("item/started", collab("call_1", "spawnAgent", "inProgress", [], {}, 1796210207990)),
  note("thread/status/changed", { threadId: child, status: { type: "idle" } }),
  rootItem("item/completed", collab("call_1", "spawnAgent", "completed", [child], { [child]: "pendingInit" }, 1796210207990)),
  note("turn/started", { threadId: child, turn: { id: childTurn, rootTurnId: rootTurn, status: "inProgress", startedAt: 1796210208, completedAt: null } }),
  childItem("item/started", { type: "userMessage", id: "u1", content: [] }),
  childItem("item/completed", { type: "userMessage", id: "u1", content: [] }),
  rootItem("item/started", collab("call_2", "wait", "inProgress", [child], {}, 1796210208685)),
  childItem("item/started", { ...message, text: "" }),
  note("item/agentMessage/delta", { threadId: child, turnId: childTurn, itemId: "msg_3", delta: "echo: CHILD " }),
  childItem("item/completed", message),
  note("thread/tokenUsage/updated", { threadId: child, turnId: childTurn, tokenUsage: usage(120, 120) }),
  note("turn/completed", { threadId: child, turn: { id: childTurn, rootTurnId: rootTurn, status: "completed", startedAt: 1796210208, completedAt: 1796210209 } }),
  rootItem("item/completed", collab("call_2", "wait", "completed", [child], { [child]: "completed" }, 1796210208685)),
  note("item/agentMessage/delta", { threadId: root, turnId: rootTurn, itemId: "msg_4", delta: "root text" })
]

const run = (config: Partial<PromptRequestPayload>) =>
  Effect.gen(function* () {
    const { rpc } = yield* connected
    const events: Array<TurnEvent> = []
    const turn = yield* makeCodexTurn({
      runId: unsafeMake.runId("run-1"),
      rpc,
      threadId: root,
      config: { agent_kind: "codex", conversation_id: "", run_id: "", ...config },
      sink: { emit: (e) => Effect.sync(() => void events.push(e)) },
      baseline: zero,
      onTotal: () => {},
      nextInteractionId: (prefix) => unsafeMake.interactionId(`${prefix}_1`),
      reconnectBudget: Duration.seconds(30),
      scope: yield* Effect.scope
    })
    turn.adoptTurnId(rootTurn)
    const handled: Array<boolean> = []
    for (const m of recorded) handled.push(yield* turn.handle(m))
    return { events, handled }
  })

describe("Codex sub-agent observations", () => {
  it.effect("with the opt-in: identity first, then the child's lifecycle, turn, items and every coordination", () =>
    Effect.gen(function* () {
      const { events } = yield* run({ observe_subagent_identities: true })
      assert.deepStrictEqual(events, [
        {
          type: "subagent_coordination",
          payload: { id: "call_1", kind: "create_subagent_call", status: "in_progress", actor_id: "", recipients: [], text: "CHILD do the thing", model: "fake-model", reasoning_effort: "medium" }
        },
        {
          type: "subagent_coordination",
          payload: { id: "call_1", kind: "create_subagent_call", status: "completed", actor_id: "", recipients: [child], text: "CHILD do the thing", model: "fake-model", reasoning_effort: "medium" }
        },
        {
          type: "subagent_identity",
          payload: { native_id: child, parent_native_id: root, native_created_at: 1796210207, parent_turn_id: rootTurn, source_item_id: "call_1", name: null, instructions: "CHILD do the thing" }
        },
        { type: "subagent_lifecycle", payload: { native_id: child, effect_id: `call_1:${child}:pendingInit`, status: "pending_init", occurred_at_ms: 1796210207995 } },
        {
          type: "subagent_turn",
          payload: { native_id: child, turn_id: childTurn, status: "in_progress", created_at_ms: 1796210208000, started_at_ms: 1796210208000, completed_at_ms: null, usage: null }
        },
        {
          type: "subagent_coordination",
          payload: { id: "call_2", kind: "wait_call", status: "in_progress", actor_id: "", recipients: [child], text: null, model: null, reasoning_effort: null }
        },
        {
          type: "subagent_item",
          payload: { native_id: child, turn_id: childTurn, item_id: "msg_3", position: 0, kind: "output_message", payload: { id: "msg_3", status: "completed", text: "echo: CHILD do the thing" } }
        },
        {
          type: "subagent_turn",
          payload: {
            native_id: child, turn_id: childTurn, status: "completed", created_at_ms: 1796210208000, started_at_ms: 1796210208000, completed_at_ms: 1796210209000,
            usage: {
              tokens: { input_tokens: 100, cached_input_tokens: 10, output_tokens: 20, reasoning_output_tokens: 5, total_tokens: 120 },
              input_tokens: 100,
              output_tokens: 20
            }
          }
        },
        {
          type: "subagent_coordination",
          payload: { id: "call_2", kind: "wait_call", status: "completed", actor_id: "", recipients: [child], text: null, model: null, reasoning_effort: null }
        },
        { type: "subagent_lifecycle", payload: { native_id: child, effect_id: `call_2:${child}:completed`, status: "completed", occurred_at_ms: 1796210208690 } },
        { type: "delta", delta: "root text" }
      ])
    }))

  it.effect("without the opt-in nothing of the child reaches the Run and its notifications are not the Turn's", () =>
    Effect.gen(function* () {
      const { events, handled } = yield* run({})
      assert.deepStrictEqual(events, [{ type: "delta", delta: "root text" }])
      // The child's turn, items, delta and usage are left to the Executor (ignored there), never claimed.
      assert.deepStrictEqual(handled.map((h, i) => (h ? i : -1)).filter((i) => i >= 0), [0, 2, 6, 12, 13])
    }))

  it("names statuses and coordination kinds from the native values", () => {
    assert.strictEqual(snake("pendingInit"), "pending_init")
    assert.strictEqual(snake("inProgress"), "in_progress")
    assert.strictEqual(snake("completed"), "completed")
    assert.strictEqual(coordinationKind("spawnAgent"), "create_subagent_call")
    assert.strictEqual(coordinationKind("closeAgent"), "close_agent_call")
  })
})
