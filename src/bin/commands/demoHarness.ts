/**
 * The Harness kinds `agentwire demo --harness KIND` can run, and what each needs from the environment before the
 * demo starts anything (so a missing setting is named at once, not after a daemon declared the kind unavailable).
 *
 * - `scripted`: nothing; the scripted Turn of demo.ts (steered once).
 * - `codex`: `AGENTWIRE_CODEX_CONFIG` (the model provider) and the provider's key in its `env_key` variable;
 *   optionally `AGENTWIRE_CODEX_PATH`. README "The codex harness".
 * - `claude_code`: `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`; optionally `ANTHROPIC_BASE_URL`,
 *   `ANTHROPIC_MODEL`, `AGENTWIRE_CLAUDE_CODE_PATH`. README "The claude_code harness".
 *
 * A real kind's Turn is one plain prompt (`--prompt`), not steered.
 */

export const demoHarnessKinds = ["scripted", "codex", "claude_code"] as const
export type DemoHarness = typeof demoHarnessKinds[number]

/** The demo Turn's input per real kind unless `--prompt` says otherwise. */
export const demoPrompts: Record<Exclude<DemoHarness, "scripted">, string> = {
  codex: "Say hello from Codex in one short sentence.",
  claude_code: "Say hello from Claude Code in one short sentence."
}

/** Daemon variables the demo passes through (the real kinds' settings); every other AGENTWIRE_* is dropped. */
export const demoPassThrough: ReadonlySet<string> = new Set([
  "AGENTWIRE_LOG_LEVEL",
  "AGENTWIRE_CODEX_PATH",
  "AGENTWIRE_CODEX_CONFIG",
  "AGENTWIRE_CLAUDE_CODE_PATH"
])

const blank = (value: string | undefined) => (value ?? "").trim() === ""

/** What the kind still needs from the environment, or undefined when the demo can start. Names, never values. */
export const missingSetup = (kind: DemoHarness, env: Readonly<Record<string, string | undefined>>): string | undefined => {
  switch (kind) {
    case "scripted":
      return undefined
    case "codex":
      return blank(env["AGENTWIRE_CODEX_CONFIG"])
        ? "the codex demo needs a model provider: set AGENTWIRE_CODEX_CONFIG (one KEY=VALUE per line: model_provider, " +
          "model_providers.<id>.base_url, .env_key, .wire_api) and the key in the env_key variable; " +
          "optionally AGENTWIRE_CODEX_PATH. See README \"The codex harness\"."
        : undefined
    case "claude_code":
      return blank(env["ANTHROPIC_API_KEY"]) && blank(env["ANTHROPIC_AUTH_TOKEN"])
        ? "the claude_code demo needs a model key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN); optionally " +
          "ANTHROPIC_BASE_URL, ANTHROPIC_MODEL and AGENTWIRE_CLAUDE_CODE_PATH. See README \"The claude_code harness\"."
        : undefined
  }
}
