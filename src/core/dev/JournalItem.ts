/**
 * One item of a Turn's journal stream as followers see it (SSE, the live view, other nodes' feeds): an entry, a
 * Core-side notice, or the terminal record. Its own module so the journal and the multi-node feed share it
 * without importing each other.
 */
import type { JournalKind, TurnRecord } from "./TurnStore.js"

export type JournalItem =
  /** A journal entry with its position: a Run frame as received (`kind` frame) or another delivery fact. */
  | { readonly _tag: "entry"; readonly seq: number; readonly kind: JournalKind; readonly type: string; readonly bodyJson: string }
  /** A Core-side fact about an active input or an interaction that the frame journal does not carry. */
  | { readonly _tag: "notice"; readonly event: "input" | "interaction" | "initialization"; readonly data: unknown }
  /** The Turn's terminal record; the last item of every stream. */
  | { readonly _tag: "outcome"; readonly turn: TurnRecord }
