/**
 * Schemas for the `codex app-server` messages the adapter uses (reference harnesses.md §2; read from
 * `codex app-server generate-ts` of the pinned 0.171.0). Each decodes only the fields the adapter reads and
 * requires them; unknown fields are ignored (the protocol grows), and a message that fails its schema is
 * dropped with a debug log, never echoed.
 */
import { Schema } from "effect"

const Str = Schema.String
const NullableStr = Schema.optionalKey(Schema.NullOr(Schema.String))
const NullableNum = Schema.optionalKey(Schema.NullOr(Schema.Number))

// ---------------------------------------------------------------------------------------------- results

export const InitializeResult = Schema.Struct({ userAgent: Str })
export const ThreadResult = Schema.Struct({ thread: Schema.Struct({ id: Str }) })
export const TurnStartResult = Schema.Struct({ turn: Schema.Struct({ id: Str }) })
export const TurnSteerResult = Schema.Struct({ turnId: Str })
export const AnyResult = Schema.Unknown

// ---------------------------------------------------------------------------------------------- notifications

export const TokenBreakdown = Schema.Struct({
  totalTokens: Schema.Number,
  inputTokens: Schema.Number,
  cachedInputTokens: Schema.Number,
  outputTokens: Schema.Number,
  reasoningOutputTokens: Schema.Number
})
export type TokenBreakdown = typeof TokenBreakdown.Type

export const TurnError = Schema.Struct({ message: Str, codexErrorInfo: Schema.optionalKey(Schema.Unknown) })
export type TurnError = typeof TurnError.Type

export const TurnStatus = Schema.Literals(["completed", "interrupted", "failed", "inProgress"])

export const TurnCompleted = Schema.Struct({
  threadId: Str,
  turn: Schema.Struct({ id: Str, status: TurnStatus, error: Schema.optionalKey(Schema.NullOr(TurnError)) })
})

/** `item/started` and `item/completed`: the item is decoded further by type (`decodeItem`). */
export const ItemEvent = Schema.Struct({
  threadId: Str,
  turnId: Str,
  item: Schema.Struct({ type: Str, id: Str })
})

export const TextDelta = Schema.Struct({ threadId: Str, turnId: Str, itemId: Str, delta: Str })

export const TokenUsageUpdated = Schema.Struct({
  threadId: Str,
  turnId: Str,
  tokenUsage: Schema.Struct({ total: TokenBreakdown })
})

export const ErrorNotification = Schema.Struct({
  threadId: Str,
  turnId: Str,
  error: TurnError,
  willRetry: Schema.Boolean
})

export const ServerRequestResolved = Schema.Struct({ threadId: Str, requestId: Schema.Union([Schema.Number, Str]) })

// ---------------------------------------------------------------------------------------------- items

export const AgentMessageItem = Schema.Struct({ type: Schema.Literal("agentMessage"), id: Str, text: Str, phase: NullableStr })
export const CommandExecutionItem = Schema.Struct({
  type: Schema.Literal("commandExecution"),
  id: Str,
  command: Str,
  cwd: NullableStr,
  status: Str,
  aggregatedOutput: NullableStr,
  exitCode: NullableNum,
  durationMs: NullableNum
})
export const FileChangeItem = Schema.Struct({
  type: Schema.Literal("fileChange"),
  id: Str,
  status: Str,
  changes: Schema.Array(Schema.Struct({ path: Str, kind: Schema.optionalKey(Schema.Unknown) }))
})
export const McpToolCallItem = Schema.Struct({
  type: Schema.Literal("mcpToolCall"),
  id: Str,
  server: Str,
  tool: Str,
  status: Str,
  arguments: Schema.optionalKey(Schema.Unknown),
  result: Schema.optionalKey(Schema.Unknown),
  error: Schema.optionalKey(Schema.Unknown),
  durationMs: NullableNum
})
export const DynamicToolCallItem = Schema.Struct({
  type: Schema.Literal("dynamicToolCall"),
  id: Str,
  tool: Str,
  status: Str,
  arguments: Schema.optionalKey(Schema.Unknown),
  success: Schema.optionalKey(Schema.NullOr(Schema.Boolean)),
  durationMs: NullableNum
})
export const WebSearchItem = Schema.Struct({
  type: Schema.Literal("webSearch"),
  id: Str,
  query: Schema.optionalKey(Str)
})

export const ToolItem = Schema.Union([CommandExecutionItem, FileChangeItem, McpToolCallItem, DynamicToolCallItem, WebSearchItem])
export type ToolItem = typeof ToolItem.Type
export const decodeToolItem = Schema.decodeUnknownOption(ToolItem)

/** A native multi-agent call (`spawnAgent`, `wait`, `sendInput`, …), with the last known state of its targets. */
export const CollabAgentToolCallItem = Schema.Struct({
  type: Schema.Literal("collabAgentToolCall"),
  id: Str,
  tool: Str,
  status: Str,
  senderThreadId: Str,
  receiverThreadIds: Schema.Array(Str),
  prompt: NullableStr,
  model: NullableStr,
  reasoningEffort: NullableStr,
  agentsStates: Schema.optionalKey(Schema.Record(Str, Schema.Struct({ status: Str }))),
  startedAtMs: NullableNum,
  completedAtMs: NullableNum
})
export type CollabAgentToolCallItem = typeof CollabAgentToolCallItem.Type
export const decodeCollabItem = Schema.decodeUnknownOption(CollabAgentToolCallItem)

/** `turn/started` / `turn/completed` of any thread: a sub-agent's turn names the root turn (`rootTurnId`). */
export const AnyTurnEvent = Schema.Struct({
  threadId: Str,
  turn: Schema.Struct({
    id: Str,
    status: Str,
    rootTurnId: NullableStr,
    startedAt: NullableNum,
    completedAt: NullableNum
  })
})
export const decodeAgentMessage = Schema.decodeUnknownOption(AgentMessageItem)

// ---------------------------------------------------------------------------------------------- server requests

export const ApprovalRequest = Schema.Struct({
  threadId: Str,
  turnId: Str,
  itemId: Str,
  reason: NullableStr,
  command: NullableStr,
  cwd: NullableStr
})

export const ToolCallRequest = Schema.Struct({
  threadId: Str,
  turnId: Str,
  callId: Str,
  tool: Str,
  arguments: Schema.Unknown
})

export const UserInputRequest = Schema.Struct({
  threadId: Str,
  turnId: Str,
  itemId: Str,
  questions: Schema.Array(Schema.Struct({
    id: Str,
    header: Str,
    question: Str,
    isOther: Schema.Boolean,
    isSecret: Schema.Boolean,
    options: Schema.NullOr(Schema.Array(Schema.Struct({ label: Str, description: Str })))
  }))
})

export const decode = <A>(schema: Schema.Decoder<A>) => Schema.decodeUnknownOption(schema)
