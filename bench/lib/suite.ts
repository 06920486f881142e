/**
 * The shape every bench suite has: it runs bounded work and returns figures and notes. Suites run one after
 * another in the bench process; a suite that needs processes of its own spawns them and ends them itself.
 */
import type { Figure } from "./figures.js"

export interface SuiteContext {
  /** Smoke run: fewer rounds, shorter runs, smaller counts. */
  readonly quick: boolean
  /** Absolute path of the repository root (for dist/ and the bench bundle). */
  readonly root: string
  /** Absolute path of the running bench bundle (children are spawned from it). */
  readonly self: string
  /** Progress line on stderr. */
  readonly log: (line: string) => void
}

export interface SuiteResult {
  readonly figures: ReadonlyArray<Figure>
  /** Facts a reader needs next to the figures (what was measured, what was skipped and why). */
  readonly notes: ReadonlyArray<string>
}

export interface Suite {
  readonly name: string
  readonly describe: string
  readonly run: (ctx: SuiteContext) => Promise<SuiteResult>
}
