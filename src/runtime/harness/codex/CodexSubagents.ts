/**
 * Sub-agent observations of one Codex Turn (`observe_subagent_identities`; reference harnesses.md §1.5, wire
 * reference §8.5). Observed with 0.171.0 against the fake Responses server: the model's `multi_agent_v1`
 * `spawn_agent` call is a `collabAgentToolCall` item of the root turn (`tool: "spawnAgent"`; its completion names
 * the child thread in `receiverThreadIds` and its state in `agentsStates`); the child runs its own thread whose
 * turns carry `rootTurnId` = the root turn id, with ordinary items and usage under the child's thread id.
 *
 * Translation (decisions recorded in docs/harness-codex.md, "Sub-agents"; the 0.10.0 frame shapes are unconfirmed):
 * - every multi-agent call item of the root turn or of a known child → `subagent_coordination` (`actor_id` empty
 *   for the root agent, else the sender's thread id), on start and on completion;
 * - a child seen for the first time (a completed spawn's receiver, or a turn whose `rootTurnId` is ours) →
 *   `subagent_identity` first, before anything else about it;
 * - a target's `agentsStates` status that changed → `subagent_lifecycle` (`effect_id` = call id + child id +
 *   status: stable across history reads, derived from native ids only);
 * - a child turn's start and end → `subagent_turn` (usage rebased to that turn, null until known);
 * - a child's completed message or tool item → `subagent_item` (a complete snapshot of the ordinary frame's
 *   payload, `position` in native order within the child turn). Deltas of a child are not forwarded.
 *
 * Statuses are the native values in snake_case (`pendingInit` → `pending_init`, `inProgress` → `in_progress`).
 * Nothing of a child thread ever reaches the root Run as an ordinary frame.
 */
import { Clock, Effect, Option } from "effect"
import type { SubagentCoordinationPayload } from "../../../proto/Subagents.js"
import type { Usage } from "../../../proto/RunEvents.js"
import type { TurnEvent } from "../Harness.js"
import { toolCall, toTokens, totalBefore } from "./CodexItems.js"
import * as P from "./CodexProtocol.js"

export interface SubagentHost {
  /** The root thread (the Executor's). */
  readonly threadId: string
  /** The root turn id, once known. */
  readonly turnId: () => string | undefined
  readonly emit: (event: TurnEvent) => Effect.Effect<void>
  /** Attach the neutral observation to a child's tool items (`observe_tool_observations`). */
  readonly observeTools: boolean
}

export interface Subagents {
  /** Translates one notification; true when it was about a sub-agent (or a multi-agent call) of this Turn. */
  readonly handle: (method: string, params: unknown) => Effect.Effect<boolean>
}

/** `pendingInit` → `pending_init`. */
export const snake = (value: string): string => value.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

/** The coordination kind of a native multi-agent tool (`spawnAgent` is the reference's `create_subagent_call`). */
export const coordinationKind = (tool: string): string => (tool === "spawnAgent" ? "create_subagent_call" : `${snake(tool)}_call`)

interface ChildTurn {
  readonly nativeId: string
  readonly createdAtMs: number
  position: number
  baseline: P.TokenBreakdown | undefined
  usage: Usage | null
}

const nonEmpty = (value: string | null | undefined) => (value === undefined || value === null || value === "" ? null : value)

export const makeSubagents = (host: SubagentHost): Subagents => {
  /** Children whose identity was published, with the last published lifecycle status. */
  const children = new Map<string, { status: string | undefined }>()
  const turns = new Map<string, ChildTurn>()
  /** The root's spawn call in progress: the source of a child that shows up before the call completes. */
  let spawning: P.CollabAgentToolCallItem | undefined

  const isRootTurn = (threadId: string, turnId: string) => threadId === host.threadId && host.turnId() === turnId

  const identify = (nativeId: string, source: P.CollabAgentToolCallItem | undefined, atMs: number) =>
    Effect.suspend(() => {
      if (children.has(nativeId)) return Effect.void
      children.set(nativeId, { status: undefined })
      return host.emit({
        type: "subagent_identity",
        payload: {
          native_id: nativeId,
          parent_native_id: source?.senderThreadId ?? host.threadId,
          native_created_at: Math.floor(atMs / 1000),
          parent_turn_id: host.turnId() ?? "",
          source_item_id: source?.id ?? "",
          name: null,
          instructions: nonEmpty(source?.prompt)
        }
      })
    })

  const onCollab = (item: P.CollabAgentToolCallItem, completed: boolean) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const at = (completed ? item.completedAtMs : item.startedAtMs) ?? now
      const coordination: SubagentCoordinationPayload = {
        id: item.id,
        kind: coordinationKind(item.tool),
        status: snake(item.status),
        actor_id: item.senderThreadId === host.threadId ? "" : item.senderThreadId,
        recipients: item.receiverThreadIds,
        text: nonEmpty(item.prompt),
        model: nonEmpty(item.model),
        reasoning_effort: nonEmpty(item.reasoningEffort)
      }
      yield* host.emit({ type: "subagent_coordination", payload: coordination })
      if (item.tool === "spawnAgent") {
        if (!completed) spawning = item
        else {
          if (spawning?.id === item.id) spawning = undefined
          for (const child of item.receiverThreadIds) yield* identify(child, item, at)
        }
      }
      for (const [child, state] of Object.entries(item.agentsStates ?? {})) {
        const known = children.get(child)
        if (known === undefined || known.status === state.status) continue
        known.status = state.status
        yield* host.emit({
          type: "subagent_lifecycle",
          payload: { native_id: child, effect_id: `${item.id}:${child}:${state.status}`, status: snake(state.status), occurred_at_ms: at }
        })
      }
    })

  const turnFrame = (turnId: string, turn: ChildTurn, status: string, completedAtMs: number | null) =>
    host.emit({
      type: "subagent_turn",
      payload: {
        native_id: turn.nativeId,
        turn_id: turnId,
        status: snake(status),
        created_at_ms: turn.createdAtMs,
        started_at_ms: turn.createdAtMs,
        completed_at_ms: completedAtMs,
        usage: turn.usage
      }
    })

  const item = (threadId: string, turnId: string, raw: unknown, completed: boolean): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      const collab = P.decodeCollabItem(raw)
      if (isRootTurn(threadId, turnId)) {
        if (Option.isNone(collab)) return false
        yield* onCollab(collab.value, completed)
        return true
      }
      const turn = turns.get(turnId)
      if (turn === undefined || turn.nativeId !== threadId) return false
      if (Option.isSome(collab)) yield* onCollab(collab.value, completed)
      if (!completed || Option.isSome(collab)) return true
      const message = P.decodeAgentMessage(raw)
      const tool = P.decodeToolItem(raw)
      const frame = Option.isSome(message)
        ? {
          id: message.value.id,
          kind: "output_message",
          payload: {
            id: message.value.id,
            status: "completed",
            ...(message.value.phase === undefined || message.value.phase === null ? {} : { phase: message.value.phase }),
            text: message.value.text
          }
        }
        : Option.isSome(tool)
        ? { id: tool.value.id, kind: "tool_call", payload: toolCall(tool.value, "after", host.observeTools) }
        : undefined
      if (frame === undefined) return true
      yield* host.emit({
        type: "subagent_item",
        payload: { native_id: threadId, turn_id: turnId, item_id: frame.id, position: turn.position++, kind: frame.kind, payload: frame.payload as never }
      })
      return true
    })

  const handle = (method: string, params: unknown): Effect.Effect<boolean> =>
    Effect.gen(function* () {
      switch (method) {
        case "turn/started": {
          const p = P.decode(P.AnyTurnEvent)(params)
          if (Option.isNone(p) || p.value.threadId === host.threadId) return false
          const { threadId, turn } = p.value
          const rootTurn = host.turnId()
          if (!children.has(threadId) && (rootTurn === undefined || turn.rootTurnId !== rootTurn)) return false
          const at = typeof turn.startedAt === "number" ? turn.startedAt * 1000 : yield* Clock.currentTimeMillis
          yield* identify(threadId, spawning, at)
          const state: ChildTurn = { nativeId: threadId, createdAtMs: at, position: 0, baseline: undefined, usage: null }
          turns.set(turn.id, state)
          yield* turnFrame(turn.id, state, turn.status, null)
          return true
        }
        case "turn/completed": {
          const p = P.decode(P.AnyTurnEvent)(params)
          if (Option.isNone(p)) return false
          const state = turns.get(p.value.turn.id)
          if (state === undefined || state.nativeId !== p.value.threadId) return false
          turns.delete(p.value.turn.id)
          const at = typeof p.value.turn.completedAt === "number" ? p.value.turn.completedAt * 1000 : yield* Clock.currentTimeMillis
          yield* turnFrame(p.value.turn.id, state, p.value.turn.status, at)
          return true
        }
        case "item/started":
        case "item/completed": {
          const p = P.decode(P.ItemEvent)(params)
          if (Option.isNone(p)) return false
          return yield* item(p.value.threadId, p.value.turnId, (params as { item: unknown }).item, method === "item/completed")
        }
        case "thread/tokenUsage/updated": {
          const p = P.decode(P.TokenUsageUpdated)(params)
          if (Option.isNone(p)) return false
          const state = turns.get(p.value.turnId)
          if (state === undefined || state.nativeId !== p.value.threadId) return false
          const total = p.value.tokenUsage.total
          const last = P.decode(P.TokenBreakdown)((params as { tokenUsage: { last?: unknown } }).tokenUsage.last)
          if (state.baseline === undefined && Option.isSome(last)) state.baseline = totalBefore(total, last.value)
          if (state.baseline !== undefined) state.usage = toTokens(total, state.baseline)
          return true
        }
        default: {
          // A child's deltas and other turn-scoped notifications: consumed, never attributed to the root Run.
          const p = P.decode(P.TextDelta)(params)
          return Option.isSome(p) && turns.get(p.value.turnId)?.nativeId === p.value.threadId
        }
      }
    })

  return { handle }
}
