/**
 * The Harness kinds this daemon can run, by name: each entry turns the daemon's settings into the kind's
 * registry entry, a Layer (`HarnessEntry.layer` over the kind's constructor) built once at daemon start in the
 * registry layer's scope and released at daemon shutdown. The daemon
 * selects kinds with `--harness KIND` (repeatable) or `AGENTWIRE_HARNESS` (comma-separated); the default is
 * `scripted`. A new adapter adds one line to `harnessKinds` (and, when it has settings, one field to
 * `HarnessSettings`); nothing else in the daemon changes.
 */
import { type CodexSettings, makeCodexHarness, unconfiguredCodexHarness } from "./codex/CodexHarness.js"
import { makeClaudeCodeHarness } from "./claude_code/ClaudeCodeHarness.js"
import type { ClaudeCodeSettings } from "./claude_code/ClaudeCodeSettings.js"
import { HarnessEntry, type HarnessLayer } from "./Harness.js"
import { makeScriptedHarness, type ScriptedOptions } from "./scripted/ScriptedHarness.js"
import type { ScriptedSignals } from "./scripted/ScriptedSignals.js"

/** Per-kind settings from the daemon's configuration. */
export interface HarnessSettings {
  readonly scripted?: ScriptedOptions | undefined
  readonly codex?: CodexSettings | undefined
  /** Absent: `claude_code` registers as unavailable ("not configured"). */
  readonly claudeCode?: ClaudeCodeSettings | undefined
}

/** Process services a constructor may use (built before the registry). */
export type HarnessServices = ScriptedSignals

/** Kind name → constructor. Append new kinds here. */
export const harnessKinds = {
  scripted: (settings: HarnessSettings) => HarnessEntry.layer(makeScriptedHarness(settings.scripted ?? {})),
  codex: (settings: HarnessSettings) =>
    HarnessEntry.layer(settings.codex === undefined ? unconfiguredCodexHarness : makeCodexHarness(settings.codex)),
  claude_code: (settings: HarnessSettings) => HarnessEntry.layer(makeClaudeCodeHarness(settings.claudeCode))
} as const satisfies Record<string, (settings: HarnessSettings) => HarnessLayer<HarnessServices>>

export type HarnessKindName = keyof typeof harnessKinds

/** The known kind names, in table order. */
export const harnessKindNames: ReadonlyArray<HarnessKindName> = Object.keys(harnessKinds) as ReadonlyArray<HarnessKindName>

/** The default selection. */
export const defaultHarnessKinds: ReadonlyArray<HarnessKindName> = ["scripted"]

export const isHarnessKindName = (name: string): name is HarnessKindName => Object.hasOwn(harnessKinds, name)

/** The registry entries of the selected kinds, in selection order. */
export const entriesFor = (
  kinds: ReadonlyArray<HarnessKindName>,
  settings: HarnessSettings
): ReadonlyArray<HarnessLayer<HarnessServices>> => kinds.map((kind) => harnessKinds[kind](settings))
