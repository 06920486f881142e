/**
 * A script of plain delta steps read without `JSON.parse` (issue 18, relay: the start frame's `JSON.parse` already
 * walked the 600 KB script once to unescape it; parsing it again as JSON, objects and strings, cost about 0.1 µs
 * per delta). It accepts only the text `JSON.stringify({ script: [{ delta }, …] })` writes for deltas that need no
 * escape: `{"script":[` then `{"delta":"…"}` steps separated by commas, then `]}`, nothing else (no whitespace, no
 * other member or step, no backslash and no control character anywhere in the text). Such a text is valid JSON
 * whose `script` is exactly those steps, each a valid `DeltaStep` (JSON keeps every other character of a string as
 * it is, lone surrogates included), so the answer is the one `parseInput`'s general path gives. Anything else is
 * `undefined` and goes that way.
 */

const Head = "{\"script\":["
const StepHead = "{\"delta\":\""
/** A character that changes meaning in a JSON string (an escape) or cannot appear in one (a control character). */
const Escaped = /[\\\u0000-\u001f]/

/** The steps of a plain delta script (the module comment), or `undefined` for any other text. */
export const plainDeltaScript = (text: string): ReadonlyArray<{ readonly delta: string }> | undefined => {
  const end = text.length - 2
  if (end <= Head.length || !text.startsWith(Head) || !text.endsWith("]}") || Escaped.test(text)) return undefined
  const steps: Array<{ readonly delta: string }> = []
  let i = Head.length
  for (;;) {
    if (!text.startsWith(StepHead, i)) return undefined
    const start = i + StepHead.length
    // No backslash in the text: the next quote closes the delta.
    const close = text.indexOf("\"", start)
    if (close < 0 || text.charCodeAt(close + 1) !== 0x7d) return undefined
    steps.push({ delta: text.slice(start, close) })
    i = close + 2
    if (i === end) return steps
    if (i > end || text.charCodeAt(i) !== 0x2c) return undefined
    i++
  }
}
