/**
 * Claude Code's partial-message stream (`--include-partial-messages`; reference harnesses.md §3.4) → Turn
 * events: `text_delta` → `delta` (tagged with the native message id when messages are observed, after an
 * `output_message in_progress`), `thinking_delta` → `thinking` (signatures ignored), `message_stop` →
 * `output_message completed` with the message's text. A message left open by an interrupt (`aborted`) or an
 * error stays open: no synthetic completion. Keeps the Run's concatenated text (`done.content`).
 */
import { Effect } from "effect"
import type { TurnSink } from "../Harness.js"

export const makeMessageStream = (sink: TurnSink, observeMessages: boolean, failed: () => boolean) => {
  const state = {
    content: "",
    message: undefined as { id: string; opened: boolean; text: string; aborted: boolean } | undefined
  }
  const onEvent = (event: { readonly [key: string]: unknown }) =>
    Effect.gen(function* () {
      switch (event.type) {
        case "message_start": {
          const message = event.message as { readonly id?: unknown } | undefined
          state.message = { id: typeof message?.id === "string" ? message.id : "", opened: false, text: "", aborted: false }
          return
        }
        case "content_block_delta": {
          const delta = event.delta as { readonly type?: unknown; readonly text?: unknown; readonly thinking?: unknown } | undefined
          if (delta?.type === "text_delta" && typeof delta.text === "string") {
            const message = state.message
            state.content += delta.text
            if (observeMessages && message !== undefined && message.id !== "") {
              if (!message.opened) {
                message.opened = true
                yield* sink.emit({ type: "output_message", payload: { id: message.id, status: "in_progress" } })
              }
              message.text += delta.text
              yield* sink.emit({ type: "delta", delta: delta.text, item_id: message.id })
            } else {
              yield* sink.emit({ type: "delta", delta: delta.text })
            }
          } else if (delta?.type === "thinking_delta" && typeof delta.thinking === "string") {
            yield* sink.emit({ type: "thinking", text: delta.thinking })
          }
          return
        }
        case "message_stop": {
          const message = state.message
          state.message = undefined
          // A message left open by an interrupt or an error stays open (no synthetic completion).
          if (message !== undefined && message.opened && !message.aborted && !failed()) {
            yield* sink.emit({ type: "output_message", payload: { id: message.id, status: "completed", text: message.text } })
          }
          return
        }
      }
    })


  return {
    onEvent,
    /** An `assistant` frame said this message was cut by an interrupt. */
    aborted: (messageId: string | undefined) => {
      if (state.message !== undefined && state.message.id === messageId) state.message.aborted = true
    },
    content: () => state.content
  }
}
