/**
 * Sub-agent observation frames (opt-in `observe_subagent_identities`), Envelope.id = Run id. Emit identity
 * first, then the child Turn, its items and its terminal snapshot. Unknown values stay null, never zero;
 * Core owns every public id. The 0.10.0 shapes are unconfirmed; see docs/wire-decisions.md.
 */
import { Schema } from "effect"
import { Usage } from "./RunEvents.js"

export const SubagentIdentityPayload = Schema.Struct({
  native_id: Schema.String,
  parent_native_id: Schema.String,
  native_created_at: Schema.Int,
  parent_turn_id: Schema.String,
  source_item_id: Schema.String,
  name: Schema.NullOr(Schema.String),
  instructions: Schema.NullOr(Schema.String)
})
export type SubagentIdentityPayload = typeof SubagentIdentityPayload.Type

export const SubagentLifecyclePayload = Schema.Struct({
  native_id: Schema.String,
  effect_id: Schema.String,
  status: Schema.String,
  occurred_at_ms: Schema.Int
})
export type SubagentLifecyclePayload = typeof SubagentLifecyclePayload.Type

export const SubagentTurnPayload = Schema.Struct({
  native_id: Schema.String,
  turn_id: Schema.String,
  status: Schema.String,
  created_at_ms: Schema.Int,
  started_at_ms: Schema.NullOr(Schema.Int),
  completed_at_ms: Schema.NullOr(Schema.Int),
  usage: Schema.NullOr(Usage)
})
export type SubagentTurnPayload = typeof SubagentTurnPayload.Type

export const SubagentItemPayload = Schema.Struct({
  native_id: Schema.String,
  turn_id: Schema.String,
  item_id: Schema.String,
  position: Schema.Int,
  /** An ordinary frame type such as `output_message`. */
  kind: Schema.String,
  /** A complete snapshot of that frame's payload, not a delta. */
  payload: Schema.Json
})
export type SubagentItemPayload = typeof SubagentItemPayload.Type

export const SubagentCoordinationPayload = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  status: Schema.String,
  /** Empty = the root agent. */
  actor_id: Schema.String,
  recipients: Schema.Array(Schema.String),
  text: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  reasoning_effort: Schema.NullOr(Schema.String)
})
export type SubagentCoordinationPayload = typeof SubagentCoordinationPayload.Type
